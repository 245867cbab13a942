"""Malformed model output: one stricter retry, then a clear UNAVAILABLE (real Redis, scripted
backend — a real model cannot be made to misbehave on demand)."""

from __future__ import annotations

import grpc
import pytest

from tests.conftest import TEST_KEY
from tests.integration.backends import BAD, GOOD, ScriptedBackend, SlowBackend
from tests.integration.helpers import auth, running_gateway, stub_for
from worldserve.domains.templates import STRICT_SUFFIX
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration



def settings(key_prefix: str) -> Settings:
    return Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY)


async def test_one_malformed_answer_is_retried_with_a_stricter_instruction(key_prefix, redis_url
                                                                          ) -> None:  # type: ignore[no-untyped-def]
    backend = ScriptedBackend([BAD, GOOD])
    async with running_gateway(settings(key_prefix), redis_url, backend) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.MCP), metadata=md)
        events = [e async for e in stub.StreamStep(
            pb.StepRequest(session_id=s.session_id, action='{"tool": "x"}'), metadata=md)]
        kinds = [e.WhichOneof("event") for e in events]
        assert "restart" in kinds
        after = kinds[kinds.index("restart") + 1:]
        obs = "".join(e.observation_delta for e in events[kinds.index("restart") + 1:]
                      if e.WhichOneof("event") == "observation_delta")
        assert obs == "hello" and after[-1] == "final"
        final = events[-1].final
        assert final.observation == "hello" and final.reasoning == "fine"
        assert final.usage.output_tokens == len(BAD) + len(GOOD)  # both attempts are metered
        assert STRICT_SUFFIX not in backend.prompts[0] and STRICT_SUFFIX in backend.prompts[1]


async def test_two_malformed_answers_fail_clearly_and_store_nothing(key_prefix, redis_url
                                                                   ) -> None:  # type: ignore[no-untyped-def]
    backend = ScriptedBackend([BAD])
    async with running_gateway(settings(key_prefix), redis_url, backend) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "no usable observation" in (info.value.details() or "")
        got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert got.turn_count == 0
        assert len(backend.prompts) == 2


async def test_concurrent_identical_steps_append_one_turn(key_prefix, redis_url) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    backend = ScriptedBackend([GOOD])
    async with running_gateway(settings(key_prefix), redis_url, backend) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
        req = pb.StepRequest(session_id=s.session_id, action="ls", expected_turn=0)
        results = await asyncio.gather(*[stub.Step(req, metadata=md) for _ in range(8)])
        assert {r.turn for r in results} == {1}
        assert sum(not r.replayed for r in results) == 1
        got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert got.turn_count == 1
        # different actions racing for the same turn: one wins, the others are ABORTED
        others = [pb.StepRequest(session_id=s.session_id, action=f"echo {i}", expected_turn=1)
                  for i in range(6)]
        outcomes = await asyncio.gather(*[stub.Step(r, metadata=md) for r in others],
                                        return_exceptions=True)
        wins = [o for o in outcomes if isinstance(o, pb.StepResponse)]
        aborted = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)
                   and o.code() == grpc.StatusCode.ABORTED]
        assert len(wins) == 1 and len(aborted) == 5


async def test_graceful_shutdown_lets_in_flight_streams_finish(key_prefix, redis_url) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from worldserve.gateway.server import build_gateway

    gw = build_gateway(settings(key_prefix), redis_url, backend=SlowBackend([GOOD]))
    await gw.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
        from worldserve.v1 import simulator_pb2_grpc as pb_grpc

        stub = pb_grpc.SimulatorStub(channel)
        md = auth(TEST_KEY)
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
        call = stub.StreamStep(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)
        first = await call.read()  # the stream is in flight
        assert first.WhichOneof("event") == "reasoning_delta"
        stopping = asyncio.create_task(gw.stop(grace=5.0))
        rest = []
        while (event := await call.read()) is not grpc.aio.EOF:
            rest.append(event)
        await stopping
        assert rest[-1].WhichOneof("event") == "final"
        assert rest[-1].final.observation == "hello"


async def test_idle_sessions_expire_and_steps_refresh_the_ttl(key_prefix, redis_url) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    backend = ScriptedBackend([GOOD])
    async with running_gateway(settings(key_prefix), redis_url, backend) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL, ttl_seconds=2),
                                     metadata=md)
        assert s.ttl_seconds == 2
        await asyncio.sleep(1.2)
        await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)
        await asyncio.sleep(1.2)  # 2.4 s after creation, 1.2 s after the step: still alive
        got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert got.turn_count == 1
        await asyncio.sleep(2.3)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        listed = await stub.ListSessions(pb.ListSessionsRequest(), metadata=md)
        assert s.session_id not in {x.session_id for x in listed.sessions}


async def test_reasoning_budget_forces_the_observation(key_prefix, redis_url) -> None:  # type: ignore[no-untyped-def]
    long_thought = ["<think>\n", "a ", "b ", "c ", "d ", "e\n</think>\n\n<predicted_observation>\n",
                    "late\n</predicted_observation>"]
    backend = ScriptedBackend([long_thought, ["forced\n</predicted_observation>"]])
    async with running_gateway(settings(key_prefix), redis_url, backend) as gw, stub_for(gw) as stub:
        md = auth(TEST_KEY)
        s = await stub.CreateSession(pb.CreateSessionRequest(
            domain=pb.TERMINAL, sampling=pb.SamplingParams(reasoning_budget=3, max_tokens=50)),
            metadata=md)
        events = [e async for e in stub.StreamStep(
            pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)]
        final = events[-1].final
        assert final.reasoning == "a b" and final.observation == "forced"
        assert final.usage.reasoning_tokens == 3 and final.usage.output_tokens == 4
        assert final.usage.input_tokens == 20  # two backend calls of 10 prompt tokens
        assert backend.prompts[1].startswith(backend.prompts[0])
        assert backend.prompts[1].endswith("a b \n</think>\n\n<predicted_observation>\n")
        streamed = "".join(e.observation_delta for e in events
                           if e.WhichOneof("event") == "observation_delta")
        assert streamed == "forced"
