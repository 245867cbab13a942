"""The accounting worker survives SIGKILL mid-batch: rows stored == steps served, exactly.

Real Redis, real PostgreSQL, the worker as a real process (``python -m
worldserve.accounting.worker``). Events are real steps through a gateway plus synthetic events
written by the gateway's own settle script, enough to keep batches running while we kill it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest
import redis

from tests.integration.backends import GOOD, ScriptedBackend
from tests.integration.helpers import auth, db_gateway, make_admin_key, stub_for, unique
from worldserve.accounting.reconcile import reconcile
from worldserve.accounting.synthetic import make_event, write_events
from worldserve.accounting.worker import GROUP
from worldserve.db.urls import libpq_url
from worldserve.settings import Settings
from worldserve.v1 import admin_pb2 as apb
from worldserve.v1 import admin_pb2_grpc as apb_grpc
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent / "worldserve"


def _spawn_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    env = dict(env, WORLDSERVE_WORKER_NAME=f"w-{uuid.uuid4().hex[:6]}")
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "worldserve.accounting.worker"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)


def _stored(database_url: str, tenants: list[str]) -> int:
    with psycopg.connect(libpq_url(database_url)) as conn:
        row = conn.execute("SELECT count(*) FROM usage_events WHERE tenant_id = ANY(%s)",
                           (tenants,)).fetchone()
    return int(row[0]) if row else 0


async def _serve_real_steps(settings: Settings, redis_url: str, database_url: str,
                            sessions: int, steps: int) -> tuple[str, str]:
    """Real steps through a gateway (scripted model); returns the tenant id and its key."""
    admin_md = auth(await make_admin_key(database_url))
    async with db_gateway(settings, redis_url, database_url, ScriptedBackend([GOOD])) as gw, \
            stub_for(gw) as stub:
        import grpc

        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
            admin = apb_grpc.AdminStub(channel)
            tenant = unique("acct")
            await admin.CreateTenant(apb.CreateTenantRequest(tenant_id=tenant), metadata=admin_md)
            key = (await admin.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant),
                                            metadata=admin_md)).secret

        async def episode() -> None:
            s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                         metadata=auth(key))
            for i in range(steps):
                await stub.Step(pb.StepRequest(session_id=s.session_id, action=f"cmd {i}"),
                                metadata=auth(key))

        await asyncio.gather(*(episode() for _ in range(sessions)))
    return tenant, key


async def _keep_stepping(settings: Settings, redis_url: str, database_url: str, key: str,
                         stop: asyncio.Event) -> int:
    """Load while the worker is being killed: real steps until told to stop; returns how many."""
    done = 0
    async with db_gateway(settings, redis_url, database_url, ScriptedBackend([GOOD])) as gw, \
            stub_for(gw) as stub:
        while not stop.is_set():
            s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.MCP),
                                         metadata=auth(key))
            for i in range(3):
                await stub.Step(pb.StepRequest(session_id=s.session_id, action=f"load {i}",
                                               expected_turn=i), metadata=auth(key))
                done += 1
            await stub.CloseSession(pb.CloseSessionRequest(session_id=s.session_id),
                                    metadata=auth(key))
    return done


async def test_worker_killed_mid_batch_loses_and_duplicates_nothing(
        redis_url: str, database_url: str, tmp_path: Path) -> None:
    prefix = f"wsacct-{uuid.uuid4().hex[:8]}"
    settings = Settings(gateway_port=0, key_prefix=prefix, dev_api_key=None)
    real_tenant, key = await _serve_real_steps(settings, redis_url, database_url, sessions=20,
                                               steps=5)
    client = redis.Redis.from_url(redis_url)
    synthetic_tenant = unique("synthetic")
    write_events(client, prefix, [make_event(synthetic_tenant, i) for i in range(40_000)])
    tenants = [real_tenant, synthetic_tenant]
    served = {t: int(client.hget(f"{prefix}:usage:served", t) or 0) for t in tenants}
    assert served == {real_tenant: 100, synthetic_tenant: 40_000}

    env = dict(os.environ, WORLDSERVE_REDIS_URL=redis_url, WORLDSERVE_DATABASE_URL=database_url,
               WORLDSERVE_KEY_PREFIX=prefix, WORLDSERVE_USAGE_BATCH_SIZE="1000",
               WORLDSERVE_USAGE_CLAIM_IDLE_S="1")
    log = tmp_path / "worker.log"
    rng = random.Random(7)
    kills_mid_batch = 0
    stop = asyncio.Event()  # steps keep being served while workers are killed
    load = asyncio.create_task(_keep_stepping(settings, redis_url, database_url, key, stop))
    try:
        for _ in range(12):
            worker = _spawn_worker(env, log)
            before = _stored(database_url, tenants)
            deadline = time.monotonic() + 60
            while _stored(database_url, tenants) == before:  # wait until it is committing
                assert worker.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                await asyncio.sleep(0.02)
            await asyncio.sleep(rng.uniform(0.0, 0.15))
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
            pending = client.xpending(f"{prefix}:usage", GROUP)["pending"]
            kills_mid_batch += pending > 0
            if kills_mid_batch >= 3 or client.xlen(f"{prefix}:usage") == 0:
                break
        assert kills_mid_batch >= 1, "no kill landed between a read and its acknowledgement"
        stop.set()
        steps_under_load = await load
        assert steps_under_load > 0
        served = {t: int(client.hget(f"{prefix}:usage:served", t) or 0) for t in tenants}
        assert served[real_tenant] == 100 + steps_under_load
        print(f"kills that left pending entries: {kills_mid_batch}; "
              f"steps served during the kills: {steps_under_load}")
        # a healthy worker takes over the dead consumers' pending entries and drains the rest
        worker = _spawn_worker(env, log)
        deadline = time.monotonic() + 120
        while not reconcile(client, database_url, prefix, tenants).balanced:
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, reconcile(client, database_url, prefix, tenants)
            await asyncio.sleep(0.2)
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0, log.read_text()
    finally:
        stop.set()
        if not load.done():
            await load
        for p in (worker,):
            if p.poll() is None:
                p.kill()
    report = reconcile(client, database_url, prefix, tenants)
    assert [(r.tenant, r.served, r.stored) for r in report.rows] == sorted(
        (t, served[t], served[t]) for t in tenants)
    with psycopg.connect(libpq_url(database_url)) as conn:
        rollup = dict(conn.execute("SELECT tenant_id, sum(steps) FROM usage_hourly WHERE "
                                   "tenant_id = ANY(%s) GROUP BY tenant_id", (tenants,)).fetchall())
    assert {t: int(v) for t, v in rollup.items()} == served
    assert client.xpending(f"{prefix}:usage", GROUP)["pending"] == 0
    # the CLI says the same
    tenant_args = [arg for t in tenants for arg in ("--tenant", t)]
    cli = subprocess.run([str(BIN), "reconcile", "--format", "json", *tenant_args], env=env,
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert {r["tenant"]: r["missing"] for r in json.loads(cli.stdout)} == dict.fromkeys(tenants, 0)
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


class _FlakySink:
    """Fails its first write (PostgreSQL down), then stores in memory."""

    def __init__(self) -> None:
        self.calls = 0
        self.rows: dict[str, object] = {}

    def write(self, events: list) -> int:  # type: ignore[type-arg]
        self.calls += 1
        if self.calls == 1:
            raise OSError("database unreachable")
        new = [e for e in events if e.event_id not in self.rows]
        self.rows.update((e.event_id, e) for e in events)
        return len(new)

    def close(self) -> None:
        pass


def test_a_failed_batch_is_retried_before_new_entries(redis_url: str) -> None:
    from worldserve.accounting.worker import Worker

    prefix = f"wsflaky-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    try:
        write_events(client, prefix, [make_event("t", i) for i in range(30)])
        sink = _FlakySink()
        worker = Worker(client, sink, prefix, "c1", batch_size=10, block_ms=10)
        worker.ensure_group()
        with pytest.raises(OSError):
            worker.run_once()
        while worker.run_once(block_ms=10):
            pass
        assert len(sink.rows) == 30 and worker.stats.events == 30
        assert client.xpending(f"{prefix}:usage", GROUP)["pending"] == 0
        assert client.xlen(f"{prefix}:usage") == 0  # acknowledged entries are deleted
    finally:
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
        client.close()
