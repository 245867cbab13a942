"""Usage events into PostgreSQL: one transaction per batch, idempotent, rollups included.

A batch is COPYed into a temporary table, then one statement inserts the events that are new
(``ON CONFLICT DO NOTHING`` on the event id) and adds exactly those rows to the hourly rollups.
A batch delivered twice (a worker died after commit, before acknowledging) therefore changes
nothing the second time.
"""

from __future__ import annotations

import psycopg

from worldserve.db.urls import libpq_url
from worldserve.quota.events import UsageEvent, utc
from worldserve.quota.limits import month_bounds, month_of

COLUMNS = ("event_id", "occurred_at", "started_at", "tenant_id", "session_id", "model_version",
           "domain", "input_tokens", "output_tokens", "reasoning_tokens", "latency_ms",
           "fault_kind", "outcome")

_INSERT = f"""
WITH ins AS (
  INSERT INTO usage_events ({", ".join(COLUMNS)})
  SELECT {", ".join(COLUMNS)} FROM usage_in
  ON CONFLICT DO NOTHING
  RETURNING *
), roll AS (
  INSERT INTO usage_hourly AS h (tenant_id, model_version, domain, hour, steps, input_tokens,
                                 output_tokens, reasoning_tokens, faults, errors, latency_ms_sum)
  SELECT tenant_id, model_version, domain, date_trunc('hour', occurred_at), count(*),
         sum(input_tokens), sum(output_tokens), sum(reasoning_tokens),
         count(*) FILTER (WHERE fault_kind <> ''), count(*) FILTER (WHERE outcome <> 'ok'),
         sum(latency_ms)
  FROM ins GROUP BY 1, 2, 3, 4
  ON CONFLICT (tenant_id, model_version, domain, hour) DO UPDATE SET
    steps = h.steps + EXCLUDED.steps,
    input_tokens = h.input_tokens + EXCLUDED.input_tokens,
    output_tokens = h.output_tokens + EXCLUDED.output_tokens,
    reasoning_tokens = h.reasoning_tokens + EXCLUDED.reasoning_tokens,
    faults = h.faults + EXCLUDED.faults,
    errors = h.errors + EXCLUDED.errors,
    latency_ms_sum = h.latency_ms_sum + EXCLUDED.latency_ms_sum
  RETURNING 1
)
SELECT count(*) FROM ins
"""


def _row(e: UsageEvent) -> tuple[object, ...]:
    return (e.event_id, utc(e.ended_at), utc(e.started_at), e.tenant, e.session_id,
            e.model_version, e.domain, e.input_tokens, e.output_tokens, e.reasoning_tokens,
            e.latency_ms, e.fault_kind, e.outcome)


class PostgresSink:
    def __init__(self, url: str) -> None:
        self._url = libpq_url(url)
        self._conn: psycopg.Connection | None = None
        self._months: set[str] = set()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self._url, connect_timeout=5)
            self._conn.execute("SET TIME ZONE 'UTC'")
            # the event columns' types only: no constraints, no defaults (ingested_at is set by
            # the real table's default when the rows move over)
            self._conn.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS usage_in ON COMMIT DELETE ROWS AS "
                f"SELECT {', '.join(COLUMNS)} FROM usage_events WITH NO DATA")
            self._conn.commit()
        return self._conn

    def _ensure_partitions(self, conn: psycopg.Connection, months: set[str]) -> None:
        for month in sorted(months - self._months):
            start, end = month_bounds(month)
            try:
                with conn.transaction():
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS usage_events_p{month} PARTITION OF "
                        f"usage_events FOR VALUES FROM ('{start.isoformat()}') "
                        f"TO ('{end.isoformat()}')")
            except psycopg.errors.DuplicateTable:
                pass  # another worker created it between our check and our statement
            self._months.add(month)

    def write(self, events: list[UsageEvent]) -> int:
        """Insert a batch in one transaction; returns how many events were new."""
        if not events:
            return 0
        try:
            conn = self._connection()
            self._ensure_partitions(conn, {month_of(e.ended_at) for e in events})
            with conn.transaction(), conn.cursor() as cur:
                with cur.copy(f"COPY usage_in ({', '.join(COLUMNS)}) FROM STDIN") as copy:
                    for event in events:
                        copy.write_row(_row(event))
                cur.execute(_INSERT)
                row = cur.fetchone()
            return int(row[0]) if row else 0
        except psycopg.OperationalError:
            self.close()  # reconnect next time
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
