"""Tables of tenants, API keys, quotas and usage (SQLAlchemy 2 declarative).

``usage_events`` is range-partitioned by month on ``occurred_at`` so inserts stay fast and old
months can be detached or dropped at tens of millions of rows; its primary key includes the
partition key, which is fine for idempotency because an event's time never changes.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    display_name: Mapped[str] = mapped_column(Text, default="")
    default_model: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_now,
                                                    server_default=func.now())
    disabled_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))


class ApiKey(Base):
    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_prefix", "prefix"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    prefix: Mapped[str] = mapped_column(String(16))  # public part, for lookup and display
    secret_hash: Mapped[str] = mapped_column(String(64))  # sha256 hex of the whole key
    role: Mapped[str] = mapped_column(String(16), default="tenant")  # tenant | admin
    name: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_now,
                                                    server_default=func.now())
    last_used_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))


class Quota(Base):
    """NULL numeric columns = the deployment default; NULL lists = everything allowed."""

    __tablename__ = "quotas"

    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"),
                                           primary_key=True)
    max_sessions: Mapped[int | None] = mapped_column(Integer)
    max_inflight_steps: Mapped[int | None] = mapped_column(Integer)
    tokens_per_minute: Mapped[int | None] = mapped_column(BigInteger)
    monthly_token_budget: Mapped[int | None] = mapped_column(BigInteger)
    allowed_models: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    allowed_domains: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_now,
                                                    onupdate=_now, server_default=func.now())


class UsageEvent(Base):
    __tablename__ = "usage_events"
    __table_args__ = (
        Index("ix_usage_events_tenant_time", "tenant_id", "occurred_at"),
        {"postgresql_partition_by": "RANGE (occurred_at)"},
    )

    event_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    occurred_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    tenant_id: Mapped[str] = mapped_column(String(64))
    session_id: Mapped[str] = mapped_column(String(64))
    model_version: Mapped[str] = mapped_column(Text)
    domain: Mapped[str] = mapped_column(String(16))
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    reasoning_tokens: Mapped[int] = mapped_column(Integer)
    latency_ms: Mapped[int] = mapped_column(Integer)
    fault_kind: Mapped[str] = mapped_column(String(32), default="")
    outcome: Mapped[str] = mapped_column(String(16), default="ok")
    # when the accounting worker inserted it (its transaction's start): ingest lag = this - occurred_at
    ingested_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True),
                                                     server_default=func.now())


class UsageHourly(Base):
    """Rollup maintained in the same transaction as the event inserts (new rows only)."""

    __tablename__ = "usage_hourly"

    tenant_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    model_version: Mapped[str] = mapped_column(Text, primary_key=True)
    domain: Mapped[str] = mapped_column(String(16), primary_key=True)
    hour: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    steps: Mapped[int] = mapped_column(BigInteger, default=0)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    reasoning_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    faults: Mapped[int] = mapped_column(BigInteger, default=0)
    errors: Mapped[int] = mapped_column(BigInteger, default=0)
    latency_ms_sum: Mapped[int] = mapped_column(BigInteger, default=0)
