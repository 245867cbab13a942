"""Synthetic usage events through the gateway's own settle script (benchmarks, crash tests).

Each event goes through exactly the Lua the gateway runs when it settles a step, so the stream
entries and ``served`` counters are the same as real traffic's, without a model in the loop.
"""

from __future__ import annotations

import time
import uuid

import redis

from worldserve.keyspace import Keyspace
from worldserve.quota.events import UsageEvent
from worldserve.quota.lua import SETTLE_LUA
from worldserve.settings import DEFAULT_MODEL_VERSION

DOMAINS = ("MCP", "SEARCH", "TERMINAL", "SWE", "WEB", "OS", "ANDROID")


def make_event(tenant: str, i: int, now: float | None = None) -> UsageEvent:
    ended = time.time() if now is None else now
    return UsageEvent(
        event_id=uuid.uuid4().hex, tenant=tenant, session_id=f"s_synthetic_{i % 97}",
        model_version=DEFAULT_MODEL_VERSION, domain=DOMAINS[i % len(DOMAINS)],
        input_tokens=200 + i % 50, output_tokens=40 + i % 30, reasoning_tokens=i % 20,
        latency_ms=150, fault_kind="timeout" if i % 10 == 0 else "", started_at=ended - 0.15,
        ended_at=ended)


def write_events(client: redis.Redis, prefix: str, events: list[UsageEvent],
                 chunk: int = 1000) -> None:
    """XADD the events (plus ``served`` counts) in pipelined settle calls."""
    script = client.register_script(SETTLE_LUA)
    ks = Keyspace(prefix)
    for start in range(0, len(events), chunk):
        pipe = client.pipeline(transaction=False)
        for e in events[start:start + chunk]:
            q = ks.quota(e.tenant)
            keys = [q.inflight, q.reserved, q.used("synthetic"), q.tpm("synthetic"),
                    ks.usage_stream, ks.usage_served]
            script(keys=keys, args=["none", e.total_tokens, e.tenant, e.to_json(), e.outcome],
                   client=pipe)
        pipe.execute()
