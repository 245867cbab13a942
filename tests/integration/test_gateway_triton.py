"""The whole path on real parts: gRPC → gateway → Redis → Triton (PyTriton) → the tiny MoE."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from tests.conftest import OTHER_KEY, TEST_KEY
from tests.integration.helpers import auth, code_of, running_gateway, stub_for
from worldserve.dev.services import free_port
from worldserve.sdk import AsyncClient, NotFound, ObservationDelta, StepResult
from worldserve.settings import DEFAULT_MODEL_VERSION
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration

# The state in the form the default model was trained on (training/terminal.py): these tests
# are about the platform, so they give the model an input it knows.
INITIAL = ("Current directory: /tmp/worldserve-sandbox/home/agent\nFiles: notes.txt\n"
           "--- notes.txt ---\nalpha beta")


def create_req(**kw: object) -> pb.CreateSessionRequest:
    base: dict[str, object] = {"domain": pb.TERMINAL, "task_instruction": "Inspect the files.",
                               "initial_state": INITIAL}
    base.update(kw)
    return pb.CreateSessionRequest(**base)  # type: ignore[arg-type]


async def test_create_stream_step_close(make_settings, redis_url) -> None:  # type: ignore[no-untyped-def]
    async with running_gateway(make_settings(), redis_url) as gw, \
            AsyncClient(f"127.0.0.1:{gw.port}", api_key=TEST_KEY) as client:
        session = await client.create_session("TERMINAL", task_instruction="Inspect the files.",
                                              initial_state=INITIAL)
        assert session.session_id.startswith("s_") and session.turn_count == 0
        events = [e async for e in client.stream_step(session.session_id, "ls", expected_turn=0)]
        final = events[-1]
        assert isinstance(final, StepResult) and final.turn == 1
        streamed = "".join(e.text for e in events if isinstance(e, ObservationDelta))
        assert streamed == final.observation
        assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
        assert 0 < final.usage.reasoning_tokens < final.usage.output_tokens
        assert final.model_version == DEFAULT_MODEL_VERSION
        second = await client.step(session.session_id, "pwd", expected_turn=1)
        assert second.turn == 2 and not second.replayed
        info = await client.get_session(session.session_id, include_turns=True)
        assert info.turn_count == 2
        assert [t.action for t in info.turns] == ["ls", "pwd"]
        assert info.turns[0].observation == final.observation
        assert await client.close_session(session.session_id) == 2
        with pytest.raises(NotFound):
            await client.get_session(session.session_id)


async def test_status_codes(make_settings, redis_url) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(max_action_bytes=64)
    async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        s = await stub.CreateSession(create_req(), metadata=md)
        ok = await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls",
                                            expected_turn=0), metadata=md)
        assert ok.turn == 1
        # a retried step returns the stored result and appends nothing
        again = await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls",
                                               expected_turn=0), metadata=md)
        assert again.replayed and again.turn == 1 and again.observation == ok.observation
        got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert got.turn_count == 1
        # expected_turn mismatch with another action
        assert await code_of(stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd",
                                                      expected_turn=0), metadata=md)) \
            == grpc.StatusCode.ABORTED
        # unknown session, and another tenant's session: both NOT_FOUND
        assert await code_of(stub.Step(pb.StepRequest(session_id="s_nope", action="ls"),
                                       metadata=md)) == grpc.StatusCode.NOT_FOUND
        # oversize action, bad sampling, unspecified domain
        assert await code_of(stub.Step(pb.StepRequest(session_id=s.session_id, action="x" * 65),
                                       metadata=md)) == grpc.StatusCode.INVALID_ARGUMENT
        bad = create_req(sampling=pb.SamplingParams(top_p=1.5))
        assert await code_of(stub.CreateSession(bad, metadata=md)) \
            == grpc.StatusCode.INVALID_ARGUMENT
        assert await code_of(stub.CreateSession(create_req(domain=pb.DOMAIN_UNSPECIFIED),
                                                metadata=md)) == grpc.StatusCode.INVALID_ARGUMENT
        # no key, wrong key
        assert await code_of(stub.CreateSession(create_req())) == grpc.StatusCode.UNAUTHENTICATED
        assert await code_of(stub.CreateSession(create_req(), metadata=auth("wrong"))) \
            == grpc.StatusCode.UNAUTHENTICATED
        # a deadline too short for the model
        assert await code_of(stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd"),
                                       metadata=md, timeout=0.01)) \
            == grpc.StatusCode.DEADLINE_EXCEEDED
        # a fork point beyond the history
        assert await code_of(stub.ForkSession(pb.ForkSessionRequest(session_id=s.session_id,
                                                                    at_turn=5),
                                              metadata=md)) == grpc.StatusCode.INVALID_ARGUMENT


async def test_other_tenant_sees_not_found(make_settings, redis_url) -> None:  # type: ignore[no-untyped-def]
    async with running_gateway(make_settings(), redis_url) as gw, stub_for(gw) as stub:
        s = await stub.CreateSession(create_req(), metadata=auth(TEST_KEY))
        mine = await stub.ListSessions(pb.ListSessionsRequest(page_size=500), metadata=auth(TEST_KEY))
        assert s.session_id in {x.session_id for x in mine.sessions}
    settings_b = make_settings(dev_api_key=OTHER_KEY, dev_tenant="tenant-b")
    async with running_gateway(settings_b, redis_url) as gw_b, stub_for(gw_b) as stub_b:
        md = auth(OTHER_KEY)
        calls = [
            stub_b.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md),
            stub_b.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md),
            stub_b.CloseSession(pb.CloseSessionRequest(session_id=s.session_id), metadata=md),
        ]
        for call in calls:
            assert await code_of(call) == grpc.StatusCode.NOT_FOUND
        stream = stub_b.StreamStep(pb.StepRequest(session_id=s.session_id, action="ls"),
                                   metadata=md)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _ in stream:
                pass
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        listed = await stub_b.ListSessions(pb.ListSessionsRequest(), metadata=md)
        assert s.session_id not in {x.session_id for x in listed.sessions}


async def test_limits_answer_resource_exhausted_with_quota_failure(make_settings, redis_url
                                                                   ) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(max_sessions_per_tenant=2, max_turns_per_session=1,
                             dev_tenant="tenant-limits")
    async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        first = await stub.CreateSession(create_req(), metadata=md)
        await stub.CreateSession(create_req(), metadata=md)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.CreateSession(create_req(), metadata=md)
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        status = rpc_status.from_call(info.value)
        assert status is not None
        kinds = [d.type_url.rsplit("/", 1)[-1] for d in status.details]
        assert "google.rpc.QuotaFailure" in kinds and "google.rpc.RetryInfo" in kinds
        failure = error_details_pb2.QuotaFailure()
        next(d for d in status.details if d.Is(failure.DESCRIPTOR)).Unpack(failure)
        assert failure.violations[0].subject == "tenant:tenant-limits:max_sessions"
        # closing frees a slot
        await stub.CloseSession(pb.CloseSessionRequest(session_id=first.session_id), metadata=md)
        third = await stub.CreateSession(create_req(), metadata=md)
        await stub.Step(pb.StepRequest(session_id=third.session_id, action="ls"), metadata=md)
        assert await code_of(stub.Step(pb.StepRequest(session_id=third.session_id, action="pwd"),
                                       metadata=md)) == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_backend_down_is_unavailable(make_settings, redis_url) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(triton_url=f"127.0.0.1:{free_port()}")
    async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        s = await stub.CreateSession(create_req(), metadata=md)
        assert await code_of(stub.Step(pb.StepRequest(session_id=s.session_id, action="ls"),
                                       metadata=md)) == grpc.StatusCode.UNAVAILABLE
        # nothing was appended
        got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert got.turn_count == 0


async def test_redis_down_is_unavailable(make_settings) -> None:  # type: ignore[no-untyped-def]
    dead = f"redis://127.0.0.1:{free_port()}/0"
    async with running_gateway(make_settings(), dead) as gw, stub_for(gw) as stub:
        assert await code_of(stub.CreateSession(create_req(), metadata=auth(TEST_KEY))) \
            == grpc.StatusCode.UNAVAILABLE


async def test_gateway_restart_keeps_sessions(make_settings, redis_url) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings()
    md = auth(TEST_KEY)
    async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
        s = await stub.CreateSession(create_req(), metadata=md)
        first = await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls",
                                               expected_turn=0), metadata=md)
    async with running_gateway(settings, redis_url) as gw2, stub_for(gw2) as stub2:
        got = await stub2.GetSession(pb.GetSessionRequest(session_id=s.session_id,
                                                          include_turns=True), metadata=md)
        assert got.turn_count == 1 and got.turns[0].observation == first.observation
        second = await stub2.Step(pb.StepRequest(session_id=s.session_id, action="pwd",
                                                 expected_turn=1), metadata=md)
        assert second.turn == 2


async def test_health_and_reflection(make_settings, redis_url) -> None:  # type: ignore[no-untyped-def]
    async with running_gateway(make_settings(), redis_url) as gw, \
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service=""))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        reply = await health.Check(health_pb2.HealthCheckRequest(service="worldserve.v1.Simulator"))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
            list_services="")]))
        services = set()
        async for response in call:
            services |= {s.name for s in response.list_services_response.service}
            break
        assert "worldserve.v1.Simulator" in services
        assert "grpc.health.v1.Health" in services


async def test_a_step_over_the_models_context_is_refused_before_any_model_time(
        make_settings, redis_url) -> None:  # type: ignore[no-untyped-def]
    """A maximum-size action (16 KiB, ~16 k tokens) against a 4,096-token model: INVALID_ARGUMENT
    naming both numbers, at once, nothing stored, and the next normal step works (issue 16)."""
    import time

    async with running_gateway(make_settings(), redis_url) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Step(pb.StepRequest(session_id=s.session_id, action="x " * 8000),
                            metadata=md)
        took = time.monotonic() - started
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        message = info.value.details() or ""
        assert "context of 4096 tokens" in message and "max_tokens is 200" in message, message
        assert took < 3.0  # refused on tokenizing, not after a 16 k-token prefill
        got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert got.turn_count == 0
        ok = await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)
        assert ok.turn == 1
