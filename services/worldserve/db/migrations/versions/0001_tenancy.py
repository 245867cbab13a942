"""Tenants, API keys, quotas, monthly-partitioned usage events, hourly usage rollups.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("display_name", sa.Text, nullable=False, server_default=""),
        sa.Column("default_model", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("disabled_at", TS),
        sa.PrimaryKeyConstraint("id", name="pk_tenants"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=False, server_default="tenant"),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
        sa.Column("last_used_at", TS),
        sa.Column("revoked_at", TS),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE",
                                name="fk_api_keys_tenant_id_tenants"),
        sa.CheckConstraint("role IN ('tenant', 'admin')", name="ck_api_keys_role"),
    )
    op.create_index("ix_api_keys_prefix", "api_keys", ["prefix"])
    op.create_table(
        "quotas",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("max_sessions", sa.Integer),
        sa.Column("max_inflight_steps", sa.Integer),
        sa.Column("tokens_per_minute", sa.BigInteger),
        sa.Column("monthly_token_budget", sa.BigInteger),
        sa.Column("allowed_models", postgresql.ARRAY(sa.Text)),
        sa.Column("allowed_domains", postgresql.ARRAY(sa.Text)),
        sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("tenant_id", name="pk_quotas"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE",
                                name="fk_quotas_tenant_id_tenants"),
    )
    op.create_table(
        "usage_events",
        sa.Column("event_id", sa.String(32), nullable=False),
        sa.Column("occurred_at", TS, nullable=False),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("model_version", sa.Text, nullable=False),
        sa.Column("domain", sa.String(16), nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("reasoning_tokens", sa.Integer, nullable=False),
        sa.Column("latency_ms", sa.Integer, nullable=False),
        sa.Column("fault_kind", sa.String(32), nullable=False, server_default=""),
        sa.Column("outcome", sa.String(16), nullable=False, server_default="ok"),
        sa.Column("ingested_at", TS, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("event_id", "occurred_at", name="pk_usage_events"),
        postgresql_partition_by="RANGE (occurred_at)",
    )
    op.create_index("ix_usage_events_tenant_time", "usage_events", ["tenant_id", "occurred_at"])
    op.create_table(
        "usage_hourly",
        sa.Column("tenant_id", sa.String(64), nullable=False),
        sa.Column("model_version", sa.Text, nullable=False),
        sa.Column("domain", sa.String(16), nullable=False),
        sa.Column("hour", TS, nullable=False),
        sa.Column("steps", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("reasoning_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("faults", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("errors", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("latency_ms_sum", sa.BigInteger, nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("tenant_id", "model_version", "domain", "hour",
                                name="pk_usage_hourly"),
    )


def downgrade() -> None:
    op.drop_table("usage_hourly")
    op.drop_table("usage_events")  # drops its partitions too
    op.drop_table("quotas")
    op.drop_index("ix_api_keys_prefix", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("tenants")
