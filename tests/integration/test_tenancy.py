"""Tenants, keys, quotas and usage on a real PostgreSQL and Redis (scripted model backend).

The model's text does not matter here; what it *reports* does: every scripted call uses 10 input
tokens and one output token per piece, so token arithmetic can be checked exactly.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.integration.backends import GOOD, INPUT_TOKENS, ScriptedBackend, SlowBackend
from tests.integration.helpers import (
    admin_stub_for,
    auth,
    code_of,
    db_gateway,
    drain_usage,
    make_admin_key,
    stub_for,
    unique,
)
from worldserve.accounting.sink import PostgresSink
from worldserve.accounting.worker import Worker
from worldserve.db.urls import libpq_url
from worldserve.dev.services import free_port
from worldserve.gateway.server import Gateway
from worldserve.quota.counters import RedisQuota
from worldserve.quota.limits import TenantLimits, month_of
from worldserve.settings import Settings
from worldserve.v1 import admin_pb2 as apb
from worldserve.v1 import admin_pb2_grpc as apb_grpc
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration
STEP_TOKENS = INPUT_TOKENS + len(GOOD)  # one well-formed scripted answer


@dataclass
class Stack:
    gateway: Gateway
    sim: pb_grpc.SimulatorStub
    admin: apb_grpc.AdminStub
    admin_md: tuple[tuple[str, str], ...]
    settings: Settings
    redis_url: str
    database_url: str

    async def tenant(self, quota: apb.Quota | None = None) -> tuple[str, tuple[tuple[str, str], ...]]:
        """A new tenant (optionally with a quota) and the metadata of a fresh key of it."""
        tenant_id = unique("t")
        await self.admin.CreateTenant(apb.CreateTenantRequest(tenant_id=tenant_id, quota=quota),
                                      metadata=self.admin_md)
        made = await self.admin.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant_id),
                                             metadata=self.admin_md)
        return tenant_id, auth(made.secret)

    def drain(self) -> Worker:
        return drain_usage(self.redis_url, self.database_url, self.settings.key_prefix)


@pytest.fixture
async def stack(key_prefix: str, redis_url: str, database_url: str) -> AsyncIterator[Stack]:
    yield await _stack(key_prefix, redis_url, database_url, ScriptedBackend([GOOD]))


_open: list[object] = []


async def _stack(key_prefix: str, redis_url: str, database_url: str, backend: object,
                 **overrides: object) -> Stack:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=None,
                        default_max_tokens=64, **overrides)  # type: ignore[arg-type]
    admin_md = auth(await make_admin_key(database_url))
    cm = db_gateway(settings, redis_url, database_url, backend)  # type: ignore[arg-type]
    gw = await cm.__aenter__()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}")
    _open.append((cm, channel))
    return Stack(gw, pb_grpc.SimulatorStub(channel), apb_grpc.AdminStub(channel), admin_md,
                 settings, redis_url, database_url)


@pytest.fixture(autouse=True)
async def _close_stacks() -> AsyncIterator[None]:
    yield
    while _open:
        cm, channel = _open.pop()
        await channel.close()  # type: ignore[attr-defined]
        await cm.__aexit__(None, None, None)  # type: ignore[attr-defined]


def create(domain: int = pb.TERMINAL) -> pb.CreateSessionRequest:
    return pb.CreateSessionRequest(domain=domain, task_instruction="list files")


def quota_failure(exc: grpc.aio.AioRpcError) -> tuple[str, int]:
    """(QuotaFailure subject, RetryInfo seconds) of a RESOURCE_EXHAUSTED error."""
    status = rpc_status.from_call(exc)
    assert status is not None
    failure, retry = error_details_pb2.QuotaFailure(), error_details_pb2.RetryInfo()
    seconds = -1
    for detail in status.details:
        if detail.Is(failure.DESCRIPTOR):
            detail.Unpack(failure)
        elif detail.Is(retry.DESCRIPTOR):
            detail.Unpack(retry)
            seconds = retry.retry_delay.seconds
    return failure.violations[0].subject, seconds


# --- isolation and keys ---

async def test_another_tenants_session_is_not_found_on_every_rpc(stack: Stack) -> None:
    _, md_a = await stack.tenant()
    _, md_b = await stack.tenant()
    s = await stack.sim.CreateSession(create(), metadata=md_a)
    await stack.sim.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md_a)
    sid = s.session_id

    async def stream_as_b() -> None:
        async for _ in stack.sim.StreamStep(pb.StepRequest(session_id=sid, action="ls"),
                                            metadata=md_b):
            pass

    calls = {
        "GetSession": stack.sim.GetSession(pb.GetSessionRequest(session_id=sid), metadata=md_b),
        "Step": stack.sim.Step(pb.StepRequest(session_id=sid, action="ls"), metadata=md_b),
        "StreamStep": stream_as_b(),
        "CloseSession": stack.sim.CloseSession(pb.CloseSessionRequest(session_id=sid),
                                               metadata=md_b),
        "ForkSession": stack.sim.ForkSession(pb.ForkSessionRequest(session_id=sid),
                                             metadata=md_b),
        "ExportTrajectory": stack.sim.ExportTrajectory(
            pb.ExportTrajectoryRequest(session_id=sid, include_forks=True), metadata=md_b),
    }
    for name, call in calls.items():
        assert await code_of(call) == grpc.StatusCode.NOT_FOUND, name
    for commit in (True, False):  # BatchStep answers per item
        batch = await stack.sim.BatchStep(pb.BatchStepRequest(
            steps=[pb.StepRequest(session_id=sid, action="ls")], commit=commit), metadata=md_b)
        assert batch.items[0].code == grpc.StatusCode.NOT_FOUND.value[0]
    listed = await stack.sim.ListSessions(pb.ListSessionsRequest(), metadata=md_b)
    assert sid not in {x.session_id for x in listed.sessions}
    # ... and A still has it, untouched by B's attempts
    got = await stack.sim.GetSession(pb.GetSessionRequest(session_id=sid), metadata=md_a)
    assert got.turn_count == 1


async def test_a_revoked_key_is_refused_within_five_seconds(stack: Stack) -> None:
    tenant, md = await stack.tenant()
    await stack.sim.CreateSession(create(), metadata=md)
    keys = await stack.admin.ListApiKeys(apb.ListApiKeysRequest(tenant_id=tenant),
                                         metadata=stack.admin_md)
    assert len(keys.keys) == 1 and keys.keys[0].HasField("last_used_at")
    await stack.admin.RevokeApiKey(apb.RevokeApiKeyRequest(key_id=keys.keys[0].key_id),
                                   metadata=stack.admin_md)
    revoked_at = time.monotonic()
    while (code := await code_of(stack.sim.CreateSession(create(), metadata=md))) \
            == grpc.StatusCode.OK:
        assert time.monotonic() - revoked_at < 5.0, "revoked key still accepted after 5 s"
        await asyncio.sleep(0.1)
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert time.monotonic() - revoked_at < 5.0


async def test_admin_api_needs_an_admin_key(stack: Stack) -> None:
    _, md = await stack.tenant()
    listing = stack.admin.ListTenants(apb.ListTenantsRequest(), metadata=md)
    assert await code_of(listing) == grpc.StatusCode.PERMISSION_DENIED
    assert await code_of(stack.admin.ListTenants(apb.ListTenantsRequest())) == \
        grpc.StatusCode.UNAUTHENTICATED
    assert await code_of(stack.admin.ListTenants(apb.ListTenantsRequest(),
                                                 metadata=auth("wsk_nope_x"))) == \
        grpc.StatusCode.UNAUTHENTICATED


async def test_admin_manages_tenants_quotas_and_keys(stack: Stack) -> None:
    tenant, _ = await stack.tenant(apb.Quota(max_sessions=3))
    dup = stack.admin.CreateTenant(apb.CreateTenantRequest(tenant_id=tenant), metadata=stack.admin_md)
    assert await code_of(dup) == grpc.StatusCode.ALREADY_EXISTS
    bad = stack.admin.CreateTenant(apb.CreateTenantRequest(tenant_id="no spaces!"),
                                   metadata=stack.admin_md)
    assert await code_of(bad) == grpc.StatusCode.INVALID_ARGUMENT
    missing = stack.admin.GetTenant(apb.GetTenantRequest(tenant_id="nobody"), metadata=stack.admin_md)
    assert await code_of(missing) == grpc.StatusCode.NOT_FOUND
    got = await stack.admin.GetTenant(apb.GetTenantRequest(tenant_id=tenant), metadata=stack.admin_md)
    assert got.quota.max_sessions == 3 and not got.quota.HasField("monthly_token_budget")
    q = await stack.admin.SetQuota(apb.SetQuotaRequest(tenant_id=tenant, quota=apb.Quota(
        monthly_token_budget=10_000, allowed_domains=["MCP"])), metadata=stack.admin_md)
    assert q.monthly_token_budget == 10_000 and list(q.allowed_domains) == ["MCP"]
    listed = await stack.admin.ListTenants(apb.ListTenantsRequest(), metadata=stack.admin_md)
    mine = next(t for t in listed.tenants if t.tenant_id == tenant)
    assert mine.quota.restrict_domains and not mine.quota.HasField("max_sessions")
    made = await stack.admin.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant, role="admin",
                                                                  name="ci"), metadata=stack.admin_md)
    assert made.secret.startswith(made.key.prefix) and made.key.role == "admin"
    with psycopg.connect(libpq_url(stack.database_url)) as conn:
        stored = conn.execute("SELECT prefix, secret_hash FROM api_keys WHERE id = %s",
                              (made.key.key_id,)).fetchone()
    assert stored is not None and made.secret not in stored and stored[0] == made.key.prefix
    bad_role = stack.admin.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant, role="root"),
                                        metadata=stack.admin_md)
    assert await code_of(bad_role) == grpc.StatusCode.INVALID_ARGUMENT
    models = await stack.admin.ListModels(apb.ListModelsRequest(), metadata=stack.admin_md)
    assert models.models[0].version == stack.settings.model_version_label


# --- quotas ---

async def test_concurrent_creates_admit_exactly_the_session_limit(stack: Stack) -> None:
    tenant, md = await stack.tenant(apb.Quota(max_sessions=10))
    outcomes = await asyncio.gather(*(stack.sim.CreateSession(create(), metadata=md)
                                      for _ in range(100)), return_exceptions=True)
    from worldserve.observability.metrics import REGISTRY

    assert REGISTRY.get_sample_value("worldserve_quota_refusals_total",
                                     {"tenant": tenant, "quota": "max_sessions"}) == 90
    ok = [o for o in outcomes if isinstance(o, pb.Session)]
    refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(ok) == 10 and len(refused) == 90
    assert {e.code() for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    subject, retry = quota_failure(refused[0])
    assert subject.endswith(":max_sessions") and retry > 0
    # a closed session's lease is released
    await stack.sim.CloseSession(pb.CloseSessionRequest(session_id=ok[0].session_id), metadata=md)
    await stack.sim.CreateSession(create(), metadata=md)


async def test_domains_and_models_outside_the_quota_are_denied(stack: Stack) -> None:
    tenant, md = await stack.tenant(apb.Quota(allowed_domains=["MCP"]))
    assert await code_of(stack.sim.CreateSession(create(pb.TERMINAL), metadata=md)) == \
        grpc.StatusCode.PERMISSION_DENIED
    s = await stack.sim.CreateSession(create(pb.MCP), metadata=md)
    await stack.admin.SetQuota(apb.SetQuotaRequest(tenant_id=tenant, quota=apb.Quota(
        allowed_models=["some-other-model"])), metadata=stack.admin_md)
    await asyncio.sleep(stack.settings.auth_cache_ttl_s + 0.2)  # the gateway's quota cache
    assert await code_of(stack.sim.CreateSession(create(pb.MCP), metadata=md)) == \
        grpc.StatusCode.PERMISSION_DENIED
    # an existing session is held to the new quota on its next step
    assert await code_of(stack.sim.Step(pb.StepRequest(session_id=s.session_id, action="x"),
                                        metadata=md)) == grpc.StatusCode.PERMISSION_DENIED


async def test_in_flight_steps_are_limited(key_prefix: str, redis_url: str,
                                           database_url: str) -> None:
    stack = await _stack(key_prefix, redis_url, database_url, SlowBackend([GOOD], 0.2))
    tenant, md = await stack.tenant(apb.Quota(max_inflight_steps=2))
    sessions = [await stack.sim.CreateSession(create(), metadata=md) for _ in range(5)]
    outcomes = await asyncio.gather(*(stack.sim.Step(pb.StepRequest(
        session_id=s.session_id, action="ls"), metadata=md) for s in sessions),
        return_exceptions=True)
    ok = [o for o in outcomes if isinstance(o, pb.StepResponse)]
    refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(ok) == 2 and len(refused) == 3
    assert all(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED for e in refused)
    assert quota_failure(refused[0])[0] == f"tenant:{tenant}:max_inflight_steps"
    quota = RedisQuota(stack.gateway.store.client, key_prefix)  # type: ignore[attr-defined]
    assert await quota.inflight(tenant) == 0  # every admitted step released its slot


async def test_tokens_per_minute(key_prefix: str, redis_url: str, database_url: str) -> None:
    # a reservation of ~prompt/1000 + 64 tokens; a settled step counts its real 14 tokens
    stack = await _stack(key_prefix, redis_url, database_url, ScriptedBackend([GOOD]),
                         reserve_bytes_per_token=1000.0)
    if time.time() % 60 > 55:  # keep both steps in one fixed minute window
        await asyncio.sleep(61 - time.time() % 60)
    tenant, md = await stack.tenant(apb.Quota(tokens_per_minute=75))
    s = await stack.sim.CreateSession(create(), metadata=md)
    await stack.sim.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.sim.Step(pb.StepRequest(session_id=s.session_id, action="pwd"), metadata=md)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    subject, retry = quota_failure(info.value)
    assert subject == f"tenant:{tenant}:tokens_per_minute" and 1 <= retry <= 60
    # a step that can never fit the quota says so instead of asking to retry
    await stack.admin.SetQuota(apb.SetQuotaRequest(tenant_id=tenant, quota=apb.Quota(
        tokens_per_minute=10)), metadata=stack.admin_md)
    await asyncio.sleep(stack.settings.auth_cache_ttl_s + 0.2)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stack.sim.Step(pb.StepRequest(session_id=s.session_id, action="pwd"), metadata=md)
    assert "lower sampling.max_tokens" in (info.value.details() or "")


async def test_budget_is_never_overshot_when_reservations_cover_the_steps(
        key_prefix: str, redis_url: str, database_url: str) -> None:
    backend = ScriptedBackend([GOOD])
    stack = await _stack(key_prefix, redis_url, database_url, backend)
    tenant, md = await stack.tenant()
    sessions = [await stack.sim.CreateSession(create(), metadata=md) for _ in range(12)]
    quota = RedisQuota(stack.gateway.store.client, stack.settings.key_prefix)  # type: ignore[attr-defined]
    month = month_of(time.time())
    await stack.sim.Step(pb.StepRequest(session_id=sessions[0].session_id, action="ls"),
                         metadata=md)
    used_one = await quota.month_used(tenant, month)
    assert used_one == STEP_TOKENS
    # a fresh session's first step renders the same prompt: its reservation is
    # prompt bytes (bytes_per_token = 1) + max_tokens
    reservation = len(backend.prompts[-1].encode()) + stack.settings.default_max_tokens
    backend.input_tokens = reservation - stack.settings.default_max_tokens - 5  # heavy steps
    budget = used_one + 3 * reservation
    await stack.admin.SetQuota(apb.SetQuotaRequest(tenant_id=tenant, quota=apb.Quota(
        monthly_token_budget=budget)), metadata=stack.admin_md)
    await asyncio.sleep(stack.settings.auth_cache_ttl_s + 0.2)
    admitted = 0
    for _ in range(2):  # two waves of 11 concurrent steps
        outcomes = await asyncio.gather(*(stack.sim.Step(pb.StepRequest(
            session_id=s.session_id, action="ls"), metadata=md) for s in sessions[1:]),
            return_exceptions=True)
        admitted += sum(isinstance(o, pb.StepResponse) for o in outcomes)
        used = await quota.month_used(tenant, month)
        assert used is not None and used <= budget
    assert 1 <= admitted <= 3
    refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(refused) == 11  # the second wave finds the budget spent
    assert quota_failure(refused[-1])[0] == f"tenant:{tenant}:monthly_token_budget"


async def test_budget_overshoot_is_bounded_by_what_was_in_flight(
        key_prefix: str, redis_url: str, database_url: str) -> None:
    # reserve_bytes_per_token=1000 and max_tokens=4 make the reservation undershoot on purpose
    # (~5 tokens reserved, 14 used): the worst case for a budget.
    backend = SlowBackend([GOOD], 0.05)
    stack = await _stack(key_prefix, redis_url, database_url, backend,
                         reserve_bytes_per_token=1000.0)
    budget = 100
    tenant, md = await stack.tenant(apb.Quota(monthly_token_budget=budget))
    small = pb.CreateSessionRequest(domain=pb.TERMINAL, task_instruction="list files",
                                    sampling=pb.SamplingParams(max_tokens=4))
    sessions = [await stack.sim.CreateSession(small, metadata=md) for _ in range(40)]
    outcomes = await asyncio.gather(*(stack.sim.Step(pb.StepRequest(
        session_id=s.session_id, action="ls"), metadata=md) for s in sessions),
        return_exceptions=True)
    admitted = [o for o in outcomes if isinstance(o, pb.StepResponse)]
    reserved_each = -(-len(backend.prompts[0].encode()) // 1000) + 4
    quota = RedisQuota(stack.gateway.store.client, key_prefix)  # type: ignore[attr-defined]
    used = await quota.month_used(tenant, month_of(time.time()))
    assert used == len(admitted) * STEP_TOKENS
    assert admitted and len(admitted) < len(sessions)
    assert used > budget  # it did overshoot ...
    # ... by no more than what the steps in flight used beyond their reservations
    assert used - budget <= len(admitted) * (STEP_TOKENS - reserved_each)
    with pytest.raises(grpc.aio.AioRpcError) as info:  # and the budget is now closed
        await stack.sim.Step(pb.StepRequest(session_id=sessions[-1].session_id, action="x"),
                             metadata=md)
    assert quota_failure(info.value)[0] == f"tenant:{tenant}:monthly_token_budget"


# --- failures ---

async def test_a_cancelled_stream_settles_its_reservation(key_prefix: str, redis_url: str,
                                                          database_url: str) -> None:
    stack = await _stack(key_prefix, redis_url, database_url, SlowBackend([GOOD], 0.3))
    tenant, md = await stack.tenant()
    s = await stack.sim.CreateSession(create(), metadata=md)
    call = stack.sim.StreamStep(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)
    await call.read()
    call.cancel()
    quota = RedisQuota(stack.gateway.store.client, key_prefix)  # type: ignore[attr-defined]
    deadline = time.monotonic() + 3
    while await quota.inflight(tenant) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert await quota.inflight(tenant) == 0
    stack.drain()
    with psycopg.connect(libpq_url(database_url)) as conn:
        outcomes = conn.execute("SELECT outcome, output_tokens FROM usage_events WHERE "
                                "tenant_id = %s", (tenant,)).fetchall()
    assert len(outcomes) == 1 and outcomes[0][0] == "cancelled" and outcomes[0][1] >= 1


async def test_postgres_down_means_unavailable(key_prefix: str, redis_url: str) -> None:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=None)
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    async with db_gateway(settings, redis_url, dead, ScriptedBackend([GOOD])) as gw, \
            stub_for(gw) as stub, admin_stub_for(gw) as admin:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.CreateSession(create(), metadata=auth("wsk_any_key"))
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "PostgreSQL" in (info.value.details() or "")
        assert await code_of(admin.ListTenants(apb.ListTenantsRequest(),
                                               metadata=auth("wsk_any_key"))) == \
            grpc.StatusCode.UNAVAILABLE


async def test_expired_reservations_of_a_dead_gateway_are_reclaimed(key_prefix: str,
                                                                    redis_url: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url)
    quota = RedisQuota(client, key_prefix)
    tenant, limits = unique("dead-gw"), TenantLimits(max_inflight_steps=1)

    async def zero(_t: str, _m: str) -> int:
        return 0

    await quota.reserve(tenant, limits, 10, expiry_s=0.3, seed_month=zero)  # never settled
    with pytest.raises(Exception, match="in-flight"):
        await quota.reserve(tenant, limits, 10, expiry_s=0.3, seed_month=zero)
    await asyncio.sleep(0.4)
    await quota.reserve(tenant, limits, 10, expiry_s=0.3, seed_month=zero)
    await client.aclose()


# --- usage ---

async def test_usage_rows_and_report_match_the_steps_served(stack: Stack) -> None:
    tenant, md = await stack.tenant()
    for domain, steps in ((pb.TERMINAL, 3), (pb.MCP, 2)):
        s = await stack.sim.CreateSession(create(domain), metadata=md)
        for i in range(steps):
            r = await stack.sim.Step(pb.StepRequest(session_id=s.session_id, action=f"a{i}",
                                                    expected_turn=i), metadata=md)
        # a retried step is replayed from storage: no new event
        again = await stack.sim.Step(pb.StepRequest(session_id=s.session_id, action=f"a{i}",
                                                    expected_turn=i), metadata=md)
        assert again.replayed and again.turn == r.turn
    worker = stack.drain()
    assert worker.stats.inserted >= 5
    by_domain = await stack.admin.GetUsage(apb.GetUsageRequest(tenant_id=tenant,
                                                               group_by="domain"),
                                           metadata=stack.admin_md)
    rows = {r.group: r for r in by_domain.rows}
    assert rows["TERMINAL"].steps == 3 and rows["MCP"].steps == 2
    assert rows["TERMINAL"].input_tokens == 3 * INPUT_TOKENS
    assert rows["MCP"].output_tokens == 2 * len(GOOD)
    by_day = await stack.admin.GetUsage(apb.GetUsageRequest(tenant_id=tenant, group_by="day"),
                                        metadata=stack.admin_md)
    assert [r.group for r in by_day.rows] == [dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")]
    assert by_day.rows[0].steps == 5
    got = await stack.admin.GetTenant(apb.GetTenantRequest(tenant_id=tenant), metadata=stack.admin_md)
    assert got.month_tokens == 5 * STEP_TOKENS
    bad = stack.admin.GetUsage(apb.GetUsageRequest(tenant_id=tenant, group_by="week"),
                               metadata=stack.admin_md)
    assert await code_of(bad) == grpc.StatusCode.INVALID_ARGUMENT
    # delivering the same events again changes nothing (idempotent insert, rollups included)
    with psycopg.connect(libpq_url(stack.database_url)) as conn:
        before = conn.execute("SELECT sum(steps) FROM usage_hourly WHERE tenant_id = %s",
                              (tenant,)).fetchone()
    from worldserve.quota.events import UsageEvent

    with psycopg.connect(libpq_url(stack.database_url)) as conn:
        rows_again = conn.execute(
            "SELECT event_id, tenant_id, session_id, model_version, domain, input_tokens, "
            "output_tokens, reasoning_tokens, latency_ms, fault_kind, "
            "extract(epoch from started_at), extract(epoch from occurred_at), outcome "
            "FROM usage_events WHERE tenant_id = %s", (tenant,)).fetchall()
    events = [UsageEvent(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
                         float(r[10]), float(r[11]), r[12]) for r in rows_again]
    sink = PostgresSink(stack.database_url)
    assert sink.write(events) == 0
    sink.close()
    with psycopg.connect(libpq_url(stack.database_url)) as conn:
        after = conn.execute("SELECT sum(steps) FROM usage_hourly WHERE tenant_id = %s",
                             (tenant,)).fetchone()
    assert before == after == (5,)


async def test_postgres_outage_keeps_known_keys_working(key_prefix: str, redis_url: str,
                                                        database_url: str) -> None:
    from sqlalchemy.engine import make_url

    from tests.integration.helpers import TcpProxy

    url = make_url(database_url)
    proxy = await TcpProxy(url.host or "127.0.0.1", url.port or 5432).start()
    via_proxy = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    stack = await _stack(key_prefix, redis_url, via_proxy, ScriptedBackend([GOOD]),
                         auth_cache_ttl_s=0.5)
    _, md = await stack.tenant()
    _, md_new = await stack.tenant()  # created, but never used before the outage
    s = await stack.sim.CreateSession(create(), metadata=md)
    await proxy.cut()  # PostgreSQL goes away
    await asyncio.sleep(1.0)  # the cache entries expire
    for _ in range(3):  # the known key keeps stepping (stale-if-unreachable)
        await stack.sim.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)
    assert await code_of(stack.sim.CreateSession(create(), metadata=md_new)) == \
        grpc.StatusCode.UNAVAILABLE  # a key never seen cannot be checked
    await proxy.start()  # back (same port)
    await asyncio.sleep(0.6)
    await stack.sim.CreateSession(create(), metadata=md_new)
    drained = await asyncio.to_thread(stack.drain)  # outage usage reaches PostgreSQL after
    assert drained.stats.inserted >= 3


async def test_an_unseeded_budget_fails_closed_while_postgres_is_down(key_prefix: str,
                                                                       redis_url: str) -> None:
    import redis.asyncio as aioredis

    from worldserve.errors import DatabaseUnavailable

    client = aioredis.Redis.from_url(redis_url)
    quota = RedisQuota(client, key_prefix)

    async def down(_t: str, _m: str) -> int:
        raise DatabaseUnavailable("PostgreSQL unreachable")

    with pytest.raises(DatabaseUnavailable):  # a budget that cannot be checked is not granted
        await quota.reserve(unique("budgeted"), TenantLimits(monthly_token_budget=10_000), 10,
                            expiry_s=5, seed_month=down)
    tenant = unique("unbudgeted")  # nothing to enforce: served, the counter is seeded later
    await quota.reserve(tenant, TenantLimits(), 10, expiry_s=5, seed_month=down)
    assert await quota.month_used(tenant, month_of(time.time())) is None
    await client.aclose()


async def test_reservation_leases_are_renewed_only_while_held(key_prefix: str,
                                                              redis_url: str) -> None:
    """A held reservation's expiry moves forward on renew; a settled one is never re-added."""
    import redis.asyncio as aioredis

    from worldserve.quota.events import UsageEvent

    client = aioredis.Redis.from_url(redis_url)
    quota = RedisQuota(client, f"{key_prefix}-lease")
    tenant = unique("lease")

    async def seed(_tenant: str, _month: str) -> int:
        return 0

    try:
        r = await quota.reserve(tenant, TenantLimits(), 10, 2.0, seed)
        key = f"{key_prefix}-lease:{{q:{tenant}}}:inflight"
        first = await client.zscore(key, r.rid)
        await quota.renew(30.0)
        renewed = await client.zscore(key, r.rid)
        assert first is not None and renewed is not None and renewed > first + 20
        assert quota.held == 1
        now = time.time()
        await quota.settle(r, UsageEvent(
            event_id=unique("e"), tenant=tenant, session_id="s_x", model_version="m@1",
            domain="TERMINAL", input_tokens=1, output_tokens=1, reasoning_tokens=0,
            latency_ms=1, fault_kind="", started_at=now, ended_at=now, outcome="error"))
        assert quota.held == 0 and await client.zcard(key) == 0
        gone = await quota.reserve(tenant, TenantLimits(), 10, 2.0, seed)
        await client.zrem(key, gone.rid)  # settled by another path (the commit script)
        await quota.renew(30.0)
        assert await client.zcard(key) == 0 and quota.held == 0  # not re-added, forgotten
    finally:
        await client.aclose()
