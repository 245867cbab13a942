"""The OpenAI-compatible backend against a real OpenAI-compatible server: `transformers serve`
(transformers' own FastAPI server, /v1/completions streaming) loading the committed checkpoint.
The gateway renders the prompt itself; the server applies no template (issue 14)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.conftest import TEST_KEY
from tests.integration.helpers import auth, running_gateway, stub_for
from worldserve.backends.base import Completion
from worldserve.backends.openai import OpenAIBackend, parse_event, request_body
from worldserve.dev.launcher import start_transformers_serve
from worldserve.dev.services import free_port
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration
MODEL = str(Path(__file__).resolve().parents[2] / "models" / "worldserve-tiny-moe")


@pytest.fixture(scope="module")
def openai_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"http://127.0.0.1:{free_port()}"
    server = start_transformers_serve(MODEL, url, tmp_path_factory.mktemp("tserve"))
    try:
        yield url
    finally:
        server.stop(20)


def test_request_and_events_are_the_openai_wire_format() -> None:
    body = request_body("m", Completion("P", 16, 0.5, 0.9, 7))
    assert body == {"model": "m", "prompt": "P", "max_tokens": 16, "temperature": 0.5,
                    "top_p": 0.9, "stream": True, "stream_options": {"include_usage": True},
                    "seed": 7}
    assert parse_event('data: {"choices": []}') == {"choices": []}
    assert parse_event("data: [DONE]") is None and parse_event(": keep-alive") is None


async def test_backend_streams_and_reports_health(openai_url: str) -> None:
    backend = OpenAIBackend(openai_url, MODEL)
    try:
        assert await backend.ready()
        assert not await OpenAIBackend(openai_url, "some-other-model").ready()
        prompt = ("<|im_start|>user\n**Action:** ls\n<|im_end|>\n<|im_start|>assistant\n")
        chunks = [c async for c in backend.stream(Completion(prompt, 24, 0.0, 1.0, 1), 60)]
        assert "".join(c.text for c in chunks)
        assert 0 < sum(c.num_output_tokens for c in chunks) <= 24
        assert chunks[-1].finish_reason in ("length", "stop") or any(c.finish_reason
                                                                       for c in chunks)
    finally:
        await backend.aclose()


async def test_gateway_steps_over_the_openai_backend(openai_url: str, make_settings,  # type: ignore[no-untyped-def]
                                                     redis_url: str) -> None:
    settings = make_settings(backend_protocol="openai", openai_url=openai_url,
                             openai_model=MODEL, default_temperature=0.0)
    md = auth(TEST_KEY)
    async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
        s = await stub.CreateSession(pb.CreateSessionRequest(
            domain=pb.TERMINAL, initial_state="Current directory: /home/agent\nFiles: a.txt"),
            metadata=md)
        events = [e async for e in stub.StreamStep(pb.StepRequest(
            session_id=s.session_id, action="ls", expected_turn=0), metadata=md)]
        final = events[-1].final
        assert final.turn == 1 and final.observation
        assert final.usage.output_tokens > 0  # metered from the stream
        again = await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls",
                                               expected_turn=0), metadata=md)
        assert again.replayed and again.observation == final.observation  # idempotent retry
        got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert got.turn_count == 1


async def test_openai_backend_down_is_unavailable(make_settings, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(backend_protocol="openai",
                             openai_url=f"http://127.0.0.1:{free_port()}", openai_model=MODEL)
    md = auth(TEST_KEY)
    async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=md)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id), metadata=md)
        assert got.turn_count == 0


async def test_two_replicas_one_killed_no_duplicate_turn(openai_url: str, make_settings,  # type: ignore[no-untyped-def]
                                                         redis_url: str, tmp_path: Path) -> None:
    """Two `transformers serve` replicas behind one gateway (openai_replicas); one is killed
    between steps: every session goes on, on the survivor, with exactly one turn per step."""
    url2 = f"http://127.0.0.1:{free_port()}"
    second = await asyncio.to_thread(start_transformers_serve, MODEL, url2, tmp_path)
    try:
        settings = make_settings(backend_protocol="openai", openai_replicas=[openai_url, url2],
                                 openai_model=MODEL, default_max_tokens=48,
                                 replica_policy="round_robin")
        md = auth(TEST_KEY)
        async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
            sessions = [await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                                 metadata=md) for _ in range(4)]
            for s in sessions:
                await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls",
                                               expected_turn=0), metadata=md, timeout=120)
            second.stop(20)  # the second replica dies
            for s in sessions:  # every session keeps stepping, on the surviving replica
                r = await stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd",
                                                   expected_turn=1), metadata=md, timeout=120)
                assert r.turn == 2
                got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id),
                                            metadata=md)
                assert got.turn_count == 2  # no duplicate turn, none lost
    finally:
        second.stop(5)
