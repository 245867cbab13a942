"""Reconciliation: usage events served (counted in Redis when written) vs rows stored.

``served`` is incremented in the same Lua call that writes an event to the stream, so after the
worker has drained the stream, ``served == stored`` for every tenant; a difference while events
are still in the stream is the backlog, any other difference is a loss or a double count.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import redis

from worldserve.db.urls import libpq_url
from worldserve.keyspace import Keyspace


@dataclass(frozen=True, slots=True)
class Reconciliation:
    tenant: str
    served: int
    stored: int

    @property
    def missing(self) -> int:
        return self.served - self.stored


@dataclass(frozen=True, slots=True)
class Report:
    rows: list[Reconciliation]
    backlog: int  # entries still in the usage stream (not yet stored and acknowledged)

    @property
    def balanced(self) -> bool:
        return self.backlog == 0 and all(r.missing == 0 for r in self.rows)


def reconcile(client: redis.Redis, database_url: str, prefix: str,
              tenants: list[str] | None = None) -> Report:
    keys = Keyspace(prefix)
    served_raw = client.hgetall(keys.usage_served)
    served = {k.decode(): int(v) for k, v in served_raw.items()}  # type: ignore[union-attr]
    stream = keys.usage_stream
    backlog = int(client.xlen(stream)) if client.exists(stream) else 0
    with psycopg.connect(libpq_url(database_url)) as conn:
        stored: dict[str, int] = dict(conn.execute(
            "SELECT tenant_id, count(*) FROM usage_events GROUP BY tenant_id").fetchall())
    names = sorted(tenants if tenants is not None else set(served) | set(stored))
    rows = [Reconciliation(t, served.get(t, 0), int(stored.get(t, 0))) for t in names]
    return Report(rows, backlog)
