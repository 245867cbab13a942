"""The accounting worker: Redis usage stream → PostgreSQL, exactly once.

One consumer of the ``accounting`` group per process. Each round it takes over entries that a
dead consumer left unacknowledged for ``usage_claim_idle_s`` (XAUTOCLAIM), else reads new ones;
it writes the batch in one transaction (``sink``), and only after the commit acknowledges and
deletes the entries. A crash anywhere before the acknowledgement leaves the entries pending for
the next consumer; the idempotent insert makes the redelivery harmless.

``python -m worldserve.accounting.worker`` (or ``worldserve worker``) runs it until SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis

from worldserve.keyspace import Keyspace
from worldserve.quota.events import UsageEvent, from_stream_fields
from worldserve.settings import Settings

log = logging.getLogger(__name__)
GROUP = "accounting"


class Sink(Protocol):
    def write(self, events: list[UsageEvent]) -> int: ...
    def close(self) -> None: ...


@dataclass
class Stats:
    batches: int = 0
    events: int = 0
    inserted: int = 0
    claimed: int = 0
    dead_letters: int = 0
    lags_s: list[float] = field(default_factory=list)  # commit time - step end, per event

    def keep_lags(self, limit: int = 200_000) -> None:
        if len(self.lags_s) > limit:
            del self.lags_s[: len(self.lags_s) - limit]


def consumer_name(settings: Settings) -> str:
    return settings.worker_name or f"{socket.gethostname()}-{os.getpid()}"


class Worker:
    def __init__(self, client: redis.Redis, sink: Sink, prefix: str, consumer: str,
                 batch_size: int = 2000, block_ms: int = 1000, claim_idle_s: float = 30.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.r = client
        self.sink = sink
        keys = Keyspace(prefix)
        self.stream = keys.usage_stream
        self.dead_stream = keys.usage_dead
        self.consumer = consumer
        self.batch_size = batch_size
        self.block_ms = block_ms
        self.claim_idle_ms = int(claim_idle_s * 1000)
        self.clock = clock
        self.stats = Stats()
        self._next_claim = 0.0
        self._own_pending = True  # at start and after a failed batch: our own entries first

    def ensure_group(self) -> None:
        try:
            self.r.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _claim(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Entries idle longer than the claim time (their consumer is presumed dead)."""
        now = time.monotonic()
        if now < self._next_claim:
            return []
        self._next_claim = now + max(self.claim_idle_ms / 2000, 0.2)
        _, entries, _ = self.r.xautoclaim(self.stream, GROUP, self.consumer, self.claim_idle_ms,
                                          start_id="0-0", count=self.batch_size)
        entries = [e for e in entries if e is not None and e[1] is not None]
        self.stats.claimed += len(entries)
        return entries

    def _read(self, block_ms: int) -> list[tuple[bytes, dict[bytes, bytes]]]:
        if self._own_pending:  # entries delivered to us and not acknowledged (id "0")
            reply: Any = self.r.xreadgroup(GROUP, self.consumer, {self.stream: "0"},
                                           count=self.batch_size)
            entries = [e for e in (reply[0][1] if reply else []) if e[1]]
            if entries:
                return entries
            self._own_pending = False
        reply = self.r.xreadgroup(GROUP, self.consumer, {self.stream: ">"},
                                  count=self.batch_size, block=block_ms or None)
        return list(reply[0][1]) if reply else []

    def run_once(self, block_ms: int | None = None) -> int:
        """Process one batch; returns how many entries it handled."""
        entries = self._claim() or self._read(self.block_ms if block_ms is None else block_ms)
        if not entries:
            return 0
        events, ids, dead = [], [], []
        for entry_id, fields in entries:
            ids.append(entry_id)
            try:
                events.append(from_stream_fields(fields))
            except (KeyError, TypeError, ValueError):
                dead.append((entry_id, fields))
        try:
            inserted = self.sink.write(events)  # commits; raises before any acknowledgement
        except Exception:
            self._own_pending = True  # the batch is still ours: retry it before new entries
            raise
        committed = self.clock()
        pipe = self.r.pipeline(transaction=True)
        for entry_id, fields in dead:  # kept for a human, never silently dropped
            kept: dict[Any, Any] = {**fields, b"source_id": entry_id}
            pipe.xadd(self.dead_stream, kept)
        pipe.xack(self.stream, GROUP, *ids)
        pipe.xdel(self.stream, *ids)
        pipe.execute()
        self.stats.batches += 1
        self.stats.events += len(events)
        self.stats.inserted += inserted
        self.stats.dead_letters += len(dead)
        self.stats.lags_s.extend(committed - e.ended_at for e in events)
        self.stats.keep_lags()
        return len(entries)

    def run(self, stop: threading.Event) -> None:
        self.ensure_group()
        log.info("accounting worker %s reading %s", self.consumer, self.stream)
        failures = 0
        while not stop.is_set():
            try:
                self.run_once()
                failures = 0
            except Exception as exc:  # Redis or PostgreSQL down, a bad batch: back off, retry
                failures += 1
                delay = min(0.5 * 2 ** min(failures, 6), 30.0)
                log.warning("accounting batch failed (%s); retrying in %.1fs", exc, delay)
                stop.wait(delay)
        self.sink.close()


def main() -> None:
    from worldserve.accounting.sink import PostgresSink
    from worldserve.dev.services import resolve_database_url, resolve_redis_url

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = Settings()
    client = redis.Redis.from_url(resolve_redis_url(settings), socket_timeout=10,
                                  socket_connect_timeout=2)
    worker = Worker(client, PostgresSink(resolve_database_url(settings)), settings.key_prefix,
                    consumer_name(settings), settings.usage_batch_size, settings.usage_block_ms,
                    settings.usage_claim_idle_s)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker.run(stop)
    log.info("accounting worker stopped: %d events, %d new rows", worker.stats.events,
             worker.stats.inserted)


if __name__ == "__main__":
    main()
