"""Apply the Alembic migrations and create the usage partitions the coming months need.

Used by ``worldserve db upgrade``, ``worldserve up`` and the test fixtures; the migration scripts
live next to this module, so no ``alembic.ini`` is needed.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, create_engine, text

from worldserve.db.urls import sync_url
from worldserve.quota.limits import month_bounds, month_of

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    return cfg


def partition_name(month: str) -> str:
    return f"usage_events_p{month}"


def ensure_partition(conn: Connection, month: str) -> None:
    """Create the month's partition of usage_events if missing (safe to race)."""
    start, end = month_bounds(month)
    conn.execute(text(
        f"CREATE TABLE IF NOT EXISTS {partition_name(month)} PARTITION OF usage_events "
        f"FOR VALUES FROM ('{start.isoformat()}') TO ('{end.isoformat()}')"))


def coming_months(now: dt.datetime, count: int = 2) -> list[str]:
    months, cursor = [], now
    for _ in range(count):
        month = month_of(cursor.timestamp())
        months.append(month)
        cursor = month_bounds(month)[1]
    return months


def upgrade(url: str, now: dt.datetime | None = None) -> str:
    """Migrate to head and ensure this and next month's partitions; returns the revision."""
    engine = create_engine(sync_url(url))
    try:
        with engine.begin() as conn:
            # One migrator at a time when several pods start together.
            conn.execute(text("SELECT pg_advisory_xact_lock(727274)"))
            cfg = alembic_config(url)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            for month in coming_months(now or dt.datetime.now(dt.UTC)):
                ensure_partition(conn, month)
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        return str(revision)
    finally:
        engine.dispose()
