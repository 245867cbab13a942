"""Benchmark: usage events ingested per second by one accounting worker, and end-to-end lag.

    .venv/bin/python bench/usage_ingest.py [--events 100000] [--rate 1000] [--seconds 20]

Runs against the real Redis and PostgreSQL that the stack would use (a scratch database and a
scratch key prefix, both removed afterwards). Three measurements, in one run:

1. throughput: ``--events`` synthetic events (written by the gateway's own settle script) are
   put in the stream, then one worker (``python -m worldserve.accounting.worker``, batch 2000)
   drains them; events/s = events / time from the worker's start to the last row stored.
2. baseline: the same worker with a batch of 1 (one transaction per event, i.e. insert-per-
   event accounting) on a smaller sample; the ratio 1/2 is what batching buys.
3. lag: events are written at ``--rate`` per second for ``--seconds`` while a worker runs;
   lag per event = ingested_at (the worker's insert transaction) - the step's end time.

Prints a Markdown table for docs/BENCHMARKS.md. Absolute figures depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid

import psycopg
import redis
from common import scratch_database

from worldserve.accounting.synthetic import make_event, write_events
from worldserve.db.urls import libpq_url
from worldserve.dev.services import resolve_redis_url
from worldserve.settings import Settings


def count_rows(url: str) -> int:
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SELECT count(*) FROM usage_events").fetchone()
    return int(row[0]) if row else 0


LOG = "/tmp/worldserve-bench-worker.log"


def start_worker(env: dict[str, str], batch: int) -> subprocess.Popen[bytes]:
    with open(LOG, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "worldserve.accounting.worker"],
                                env=dict(env, WORLDSERVE_USAGE_BATCH_SIZE=str(batch),
                                         WORLDSERVE_WORKER_NAME=f"bench-{uuid.uuid4().hex[:6]}"),
                                stdout=log, stderr=subprocess.STDOUT)


def drain_rate(client: redis.Redis, env: dict[str, str], url: str, prefix: str, events: int,
               batch: int) -> float:
    """events/s of one worker draining ``events`` pre-written events."""
    before = count_rows(url)
    write_events(client, prefix, [make_event("bench", i) for i in range(events)])
    started = time.monotonic()
    worker = start_worker(env, batch)
    try:
        while count_rows(url) < before + events:
            if worker.poll() is not None:
                raise RuntimeError(f"worker exited; see {LOG}")
            time.sleep(0.05)
        return events / (time.monotonic() - started)
    finally:
        worker.terminate()
        worker.wait(30)


def lag_run(client: redis.Redis, env: dict[str, str], url: str, prefix: str, rate: int,
            seconds: float) -> list[float]:
    """Lag of each event written at ``rate``/s while a worker runs."""
    worker = start_worker(env, 2000)
    time.sleep(1.5)  # let the worker start and block on the stream
    tenant = f"lag-{uuid.uuid4().hex[:6]}"
    tick, per_tick = 0.01, max(rate // 100, 1)
    sent, t0 = 0, time.monotonic()
    try:
        while time.monotonic() - t0 < seconds:
            write_events(client, prefix, [make_event(tenant, sent + i) for i in range(per_tick)])
            sent += per_tick
            sleep = t0 + sent / rate - time.monotonic()
            if sleep > 0:
                time.sleep(min(sleep, tick))
        deadline = time.monotonic() + 30
        while True:
            with psycopg.connect(libpq_url(url)) as conn:
                row = conn.execute("SELECT count(*) FROM usage_events WHERE tenant_id = %s",
                                   (tenant,)).fetchone()
            if (row and row[0] >= sent) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        with psycopg.connect(libpq_url(url)) as conn:
            lags = [float(r[0]) for r in conn.execute(
                "SELECT extract(epoch from ingested_at - occurred_at) FROM usage_events "
                "WHERE tenant_id = %s", (tenant,)).fetchall()]
        if len(lags) < sent:
            raise RuntimeError(f"only {len(lags)} of {sent} events stored")
        return lags
    finally:
        worker.terminate()
        worker.wait(30)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--baseline-events", type=int, default=3_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()

    redis_url = resolve_redis_url(Settings())
    prefix = f"wsbench-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    try:
        with scratch_database() as url:
            env = dict(os.environ, WORLDSERVE_REDIS_URL=redis_url, WORLDSERVE_DATABASE_URL=url,
                       WORLDSERVE_KEY_PREFIX=prefix)
            batched = drain_rate(client, env, url, prefix, args.events, 2000)
            single = drain_rate(client, env, url, prefix, args.baseline_events, 1)
            lags = lag_run(client, env, url, prefix, args.rate, args.seconds)
    finally:
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
        client.close()

    print(f"| measurement | result |\n|---|---|\n"
          f"| ingest, one worker, batch 2000 ({args.events:,} events) | {batched:,.0f} events/s |\n"
          f"| baseline: batch 1, one transaction per event ({args.baseline_events:,} events) "
          f"| {single:,.0f} events/s |\n"
          f"| ratio batched / baseline | {batched / single:.1f}x |\n"
          f"| lag at {args.rate:,} steps/s for {args.seconds:.0f} s ({len(lags):,} events) "
          f"| p50 {statistics.median(lags) * 1000:.0f} ms, p99 {pct(lags, 0.99) * 1000:.0f} ms, "
          f"max {max(lags) * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
