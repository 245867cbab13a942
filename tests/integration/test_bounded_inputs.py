"""Inputs at and past every limit answer INVALID_ARGUMENT or NOT_FOUND, never INTERNAL (issue 16):
labels, imported trajectories, page tokens, ids echoed in errors, and every string and number of
the Admin API, against a real gateway, Redis and PostgreSQL. Ends with a property-based fuzz of
the Admin service."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, db_gateway, make_admin_key, unique
from worldserve.sessions.limits import MAX_LABEL_VALUE_BYTES, MAX_LABELS
from worldserve.settings import Settings
from worldserve.v1 import admin_pb2 as apb
from worldserve.v1 import admin_pb2_grpc as apb_grpc
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration
INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
BAD = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


@dataclass
class Stack:
    sim: pb_grpc.SimulatorStub
    admin: apb_grpc.AdminStub
    admin_md: tuple[tuple[str, str], ...]
    md: tuple[tuple[str, str], ...]  # a tenant's key


@pytest.fixture
async def stack(key_prefix: str, redis_url: str, database_url: str) -> AsyncIterator[Stack]:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=None,
                        default_max_tokens=64)
    admin_md = auth(await make_admin_key(database_url))
    async with db_gateway(settings, redis_url, database_url, EchoBackend()) as gw, \
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
        admin = apb_grpc.AdminStub(channel)
        tenant = unique("b")
        await admin.CreateTenant(apb.CreateTenantRequest(tenant_id=tenant), metadata=admin_md)
        key = await admin.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant),
                                       metadata=admin_md)
        yield Stack(pb_grpc.SimulatorStub(channel), admin, admin_md, auth(key.secret))


async def failure(call: object) -> tuple[grpc.StatusCode, str]:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


# --- sessions ---


async def test_max_tokens_the_models_context_cannot_hold_is_refused_at_create(
        stack: Stack) -> None:
    """The gateway knows the version's context (config.json here; the registry's max_model_len
    under the operator): a max_tokens that leaves no room for a prompt never reaches a step."""
    code, details = await failure(stack.sim.CreateSession(pb.CreateSessionRequest(
        domain=pb.TERMINAL, sampling=pb.SamplingParams(max_tokens=4096)), metadata=stack.md))
    assert code == INVALID and "context of 4096 tokens" in details and "4096" in details
    ok = await stack.sim.CreateSession(pb.CreateSessionRequest(
        domain=pb.TERMINAL, sampling=pb.SamplingParams(max_tokens=4095)), metadata=stack.md)
    assert ok.session_id

async def test_a_prompt_over_the_context_never_reaches_the_model_server(
        key_prefix: str, redis_url: str, database_url: str) -> None:
    """The gateway counts the rendered prompt with the checkpoint's tokenizer (stopping once it
    is certainly over) and refuses it before any model time; a long prompt that fits still
    goes through."""
    backend = EchoBackend()
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=None,
                        default_max_tokens=64)
    admin_md = auth(await make_admin_key(database_url))
    async with db_gateway(settings, redis_url, database_url, backend) as gw, \
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
        admin, sim = apb_grpc.AdminStub(channel), pb_grpc.SimulatorStub(channel)
        tenant = unique("b")
        await admin.CreateTenant(apb.CreateTenantRequest(tenant_id=tenant), metadata=admin_md)
        md = auth((await admin.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant),
                                            metadata=admin_md)).secret)
        s = await sim.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
        code, details = await failure(sim.Step(pb.StepRequest(
            session_id=s.session_id, action="x " * 8192, current_state="y " * 32768),
            metadata=md))
        assert code == INVALID, details
        assert "at least" in details and "max_tokens is 64" in details
        assert "context of 4096 tokens" in details
        assert backend.prompts == []  # never sent
        ok = await sim.Step(pb.StepRequest(session_id=s.session_id, action="ls " + "z " * 1700),
                            metadata=md)
        assert ok.turn == 1 and len(backend.prompts) == 1


async def test_labels_are_bounded_on_create_and_fork(stack: Stack) -> None:
    too_many = {f"k{i}": "v" for i in range(MAX_LABELS + 1)}
    code, msg = await failure(stack.sim.CreateSession(
        pb.CreateSessionRequest(domain=pb.TERMINAL, labels=too_many), metadata=stack.md))
    assert code == INVALID and f"at most {MAX_LABELS} labels" in msg
    big = {"note": "x" * (MAX_LABEL_VALUE_BYTES + 1)}
    code, msg = await failure(stack.sim.CreateSession(
        pb.CreateSessionRequest(domain=pb.TERMINAL, labels=big), metadata=stack.md))
    assert code == INVALID and "note" in msg
    full = {f"k{i}": "v" for i in range(MAX_LABELS)}
    s = await stack.sim.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL, labels=full),
                                      metadata=stack.md)
    code, _ = await failure(stack.sim.ForkSession(
        pb.ForkSessionRequest(session_id=s.session_id, labels={"one": "more"}),
        metadata=stack.md))
    assert code == INVALID
    fork = await stack.sim.ForkSession(  # overriding an existing label stays within the limit
        pb.ForkSessionRequest(session_id=s.session_id, labels={"k0": "w"}), metadata=stack.md)
    assert fork.labels["k0"] == "w"


async def test_a_huge_session_id_is_not_found_with_a_short_message(stack: Stack) -> None:
    code, msg = await failure(stack.sim.GetSession(
        pb.GetSessionRequest(session_id="s_" + "x" * 1_000_000), metadata=stack.md))
    assert code == NOT_FOUND and len(msg) < 300 and "1000002 characters" in msg


@pytest.mark.parametrize("token", ["-5", "1e3", "abc", "99999999999999999999", "٣"])
async def test_a_page_token_we_did_not_issue_is_invalid(stack: Stack, token: str) -> None:
    code, _ = await failure(stack.sim.ListSessions(pb.ListSessionsRequest(page_token=token),
                                                   metadata=stack.md))
    assert code == INVALID


def _record(**over: object) -> str:
    base: dict[str, object] = {"task": "terminal", "prompt": ["ls"], "response": ["a.txt"]}
    return json.dumps({**base, **over})


@pytest.mark.parametrize("content", [
    _record().replace('"task"', '"turn_idx": 1e400, "task"'),
    _record().replace('"task"', '"turn_idx": -1e400, "task"'),
    _record().replace('"task"', '"turn_idx": Infinity, "task"'),
    _record().replace('"task"', '"turn_idx": NaN, "task"'),
    _record(turn_idx=2.5),
    _record(turn_idx="7"),
    _record(response=["[" * 100_000 + "]" * 100_000]).replace('"[[', "[[").replace(']]"', "]]"),
    '{"task": "terminal", "prompt": ["\\ud800"], "response": ["a"]}',
    _record(prompt=["x" * (16 * 1024 + 1)]),
    _record(response=["y" * (64 * 1024 + 1)]),
], ids=["1e400", "-1e400", "Infinity", "NaN", "fraction", "string", "deep", "surrogate",
        "long-action", "long-observation"])
async def test_bad_imports_are_invalid_not_internal(stack: Stack, content: str) -> None:
    code, msg = await failure(stack.sim.ImportTrajectory(
        pb.ImportTrajectoryRequest(content=content.encode()), metadata=stack.md))
    assert code == INVALID, msg


async def test_an_import_within_the_limits_still_works(stack: Stack) -> None:
    reply = await stack.sim.ImportTrajectory(
        pb.ImportTrajectoryRequest(content=_record(turn_idx=1).encode()), metadata=stack.md)
    assert reply.turn_count == 1


async def test_an_import_that_could_never_be_exported_is_refused(stack: Stack) -> None:
    before = await stack.sim.ListSessions(pb.ListSessionsRequest(), metadata=stack.md)
    turns = 60  # every exported record repeats the turns before it: ~15 MB from 0.5 MB
    content = _record(prompt=[f"echo {i} " + "z" * 8000 for i in range(turns)],
                      response=[str(i) for i in range(turns)])
    code, msg = await failure(stack.sim.ImportTrajectory(
        pb.ImportTrajectoryRequest(content=content.encode()), metadata=stack.md))
    assert code == INVALID and "export" in msg
    after = await stack.sim.ListSessions(pb.ListSessionsRequest(), metadata=stack.md)
    assert len(after.sessions) == len(before.sessions)  # nothing left behind


# --- admin ---

async def test_admin_strings_with_nul_or_over_length_are_invalid(stack: Stack) -> None:
    a, md = stack.admin, stack.admin_md
    calls = [
        a.CreateTenant(apb.CreateTenantRequest(tenant_id="t\x00x"), metadata=md),
        a.CreateTenant(apb.CreateTenantRequest(tenant_id=unique("n"), display_name="a\x00"),
                       metadata=md),
        a.CreateTenant(apb.CreateTenantRequest(tenant_id=unique("n"), default_model="m\x00"),
                       metadata=md),
        a.CreateTenant(apb.CreateTenantRequest(tenant_id=unique("n"), quota=apb.Quota(
            allowed_models=["m\x00"])), metadata=md),
        a.GetTenant(apb.GetTenantRequest(tenant_id="t\x00"), metadata=md),
        a.SetQuota(apb.SetQuotaRequest(tenant_id="t" * 65, quota=apb.Quota()), metadata=md),
        a.CreateApiKey(apb.CreateApiKeyRequest(tenant_id="t" * 65), metadata=md),
        a.CreateApiKey(apb.CreateApiKeyRequest(tenant_id="ops", name="k\x00"), metadata=md),
        a.ListApiKeys(apb.ListApiKeysRequest(tenant_id="\x00"), metadata=md),
        a.RevokeApiKey(apb.RevokeApiKeyRequest(key_id="k\x00"), metadata=md),
        a.RevokeApiKey(apb.RevokeApiKeyRequest(key_id="k" * 10_000), metadata=md),
        a.GetUsage(apb.GetUsageRequest(tenant_id="ops", group_by="m\x00"), metadata=md),
    ]
    for call in calls:
        code, msg = await failure(call)
        assert code == INVALID, msg
        assert len(msg) < 300


@pytest.mark.parametrize("seconds", [2**62, -(2**62), 253_402_300_800, -62_135_596_801])
async def test_out_of_range_usage_periods_are_invalid(stack: Stack, seconds: int) -> None:
    code, _ = await failure(stack.admin.GetUsage(apb.GetUsageRequest(
        tenant_id="ops", start=Timestamp(seconds=seconds)), metadata=stack.admin_md))
    assert code == INVALID
    code, _ = await failure(stack.admin.GetUsage(apb.GetUsageRequest(
        tenant_id="ops", end=Timestamp(seconds=seconds)), metadata=stack.admin_md))
    assert code == INVALID


async def test_create_tenant_with_a_bad_quota_creates_nothing(stack: Stack) -> None:
    tenant = unique("q")
    code, _ = await failure(stack.admin.CreateTenant(apb.CreateTenantRequest(
        tenant_id=tenant, quota=apb.Quota(max_sessions=-1)), metadata=stack.admin_md))
    assert code == INVALID
    code, _ = await failure(stack.admin.GetTenant(apb.GetTenantRequest(tenant_id=tenant),
                                                  metadata=stack.admin_md))
    assert code == NOT_FOUND
    made = await stack.admin.CreateTenant(apb.CreateTenantRequest(
        tenant_id=tenant, quota=apb.Quota(max_sessions=3)), metadata=stack.admin_md)
    assert made.quota.max_sessions == 3


async def test_a_key_that_keeps_asking_what_is_refused_is_slowed_and_no_one_else_is(
        key_prefix: str, redis_url: str, database_url: str) -> None:
    """A client looping on a cheap refusal cannot take the gateway's event loop from the others:
    past its burst, a key's refusals come back at its refusal rate; its successful requests,
    another key of the same tenant and the Admin API are not held."""
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=None,
                        refusals_per_second_per_key=10, refusal_burst_per_key=3)
    admin_md = auth(await make_admin_key(database_url))
    async with db_gateway(settings, redis_url, database_url, EchoBackend()) as gw, \
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
        admin, sim = apb_grpc.AdminStub(channel), pb_grpc.SimulatorStub(channel)
        tenant = unique("r")
        await admin.CreateTenant(apb.CreateTenantRequest(tenant_id=tenant), metadata=admin_md)
        keys = [await admin.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant),
                                         metadata=admin_md) for _ in range(2)]
        noisy, quiet = auth(keys[0].secret), auth(keys[1].secret)
        missing = pb.GetSessionRequest(session_id="s_missing")

        async def timed(call: object, expect: grpc.StatusCode = NOT_FOUND) -> float:
            start = time.perf_counter()
            code, _ = await failure(call)
            assert code == expect
            return time.perf_counter() - start

        burst = [await timed(sim.GetSession(missing, metadata=noisy)) for _ in range(3)]
        assert max(burst) < 0.08
        start = time.perf_counter()
        paced = [await timed(sim.GetSession(missing, metadata=noisy)) for _ in range(5)]
        assert time.perf_counter() - start >= 0.45 and min(paced) >= 0.08  # 10 a second
        # what the noisy key is allowed still goes straight through, and nobody else waits
        assert await timed(sim.ListSessions(pb.ListSessionsRequest(), metadata=noisy),
                           grpc.StatusCode.OK) < 0.08
        assert await timed(sim.GetSession(missing, metadata=quiet)) < 0.08
        for _ in range(5):
            assert await timed(admin.GetTenant(apb.GetTenantRequest(tenant_id="nobody"),
                                               metadata=admin_md)) < 0.08
        # thirty at once queue up behind each other; none waits past the 2 s a bucket may owe
        waits = await asyncio.gather(*(timed(sim.GetSession(missing, metadata=noisy))
                                       for _ in range(30)))
        assert 0.9 <= max(waits) <= 2.5


texts = st.one_of(st.text(max_size=70), st.sampled_from(["", "ops", "\x00", "a\x00b", "é" * 65]),
                  st.builds(lambda c, n: c * n, st.characters(exclude_categories=("Cs",)),
                            st.integers(60, 5000)))
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
stamps = st.builds(Timestamp, seconds=st.integers(-(2**63), 2**63 - 1),
                   nanos=st.integers(0, 999_999_999))


@st.composite
def admin_requests(draw: st.DrawFn) -> tuple[str, object]:
    quota = apb.Quota(allowed_models=draw(st.lists(texts, max_size=3)),
                      allowed_domains=draw(st.lists(texts, max_size=3)),
                      restrict_models=draw(st.booleans()))
    for field, values in (("max_sessions", int32), ("max_inflight_steps", int32),
                          ("tokens_per_minute", int64), ("monthly_token_budget", int64)):
        if draw(st.booleans()):
            setattr(quota, field, draw(values))
    method = draw(st.sampled_from(["CreateTenant", "GetTenant", "SetQuota", "CreateApiKey",
                                   "ListApiKeys", "RevokeApiKey", "GetUsage"]))
    tenant = draw(st.one_of(texts, st.just("ops")))
    if method == "CreateTenant":
        req = apb.CreateTenantRequest(tenant_id=draw(texts), display_name=draw(texts),
                                      default_model=draw(texts))
        if draw(st.booleans()):
            req.quota.CopyFrom(quota)
        return method, req
    if method == "GetTenant":
        return method, apb.GetTenantRequest(tenant_id=tenant)
    if method == "SetQuota":
        return method, apb.SetQuotaRequest(tenant_id=tenant, quota=quota)
    if method == "CreateApiKey":
        return method, apb.CreateApiKeyRequest(tenant_id=tenant, name=draw(texts),
                                               role=draw(st.one_of(texts, st.just("tenant"))))
    if method == "ListApiKeys":
        return method, apb.ListApiKeysRequest(tenant_id=tenant)
    if method == "RevokeApiKey":
        return method, apb.RevokeApiKeyRequest(key_id=draw(texts))
    usage = apb.GetUsageRequest(tenant_id=tenant, group_by=draw(st.one_of(
        texts, st.sampled_from(["model", "domain", "day"]))))
    if draw(st.booleans()):
        usage.start.CopyFrom(draw(stamps))
    if draw(st.booleans()):
        usage.end.CopyFrom(draw(stamps))
    return method, usage


def test_fuzz_the_admin_service(key_prefix: str, redis_url: str, database_url: str) -> None:
    """300 random Admin requests (NUL, long and non-ASCII strings, any int, any timestamp)."""
    seen: dict[str, int] = {}

    async def main() -> None:
        cfg = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=None)
        md = auth(await make_admin_key(database_url))
        async with db_gateway(cfg, redis_url, database_url, EchoBackend()) as gw, \
                grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
            stub = apb_grpc.AdminStub(channel)
            cases: list[tuple[str, object]] = []

            @settings(max_examples=300, deadline=None, database=None,
                       suppress_health_check=list(HealthCheck))
            @given(admin_requests())
            def draw(case: tuple[str, object]) -> None:
                cases.append(case)

            draw()
            for method, request in cases:
                code, msg = await failure(getattr(stub, method)(request, metadata=md,
                                                                timeout=10))
                seen[code.name] = seen.get(code.name, 0) + 1
                assert code not in BAD, (method, request, msg)
                assert len(msg) <= 1100

    asyncio.run(main())
    assert sum(seen.values()) >= 300 and seen.get("INVALID_ARGUMENT", 0) > 0

