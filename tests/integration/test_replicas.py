"""Replica sets: session affinity, failover before the first token without a duplicate turn,
ejection; and a real model-server replica killed while steps keep being served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, running_gateway, stub_for
from worldserve.backends.base import Chunk, Completion
from worldserve.backends.replicas import ReplicaSet
from worldserve.errors import BackendUnavailable
from worldserve.observability.metrics import REGISTRY
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration


class Counting(EchoBackend):
    def __init__(self, name: str, fail: bool = False) -> None:
        super().__init__()
        self.name, self.fail, self.calls = name, fail, 0

    async def stream(self, request: Completion, timeout_s: float) -> AsyncIterator[Chunk]:
        self.calls += 1
        if self.fail:
            raise BackendUnavailable(f"{self.name} is down")
        async for chunk in super().stream(request, timeout_s):
            yield chunk


async def test_affinity_failover_and_no_duplicate_turn(key_prefix: str, redis_url: str) -> None:
    a, b = Counting("a"), Counting("b")
    replicas = ReplicaSet({"a": a, "b": b}, eject_s=60)
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY)
    md = auth(TEST_KEY)
    async with running_gateway(settings, redis_url, replicas) as gw, stub_for(gw) as stub:
        sessions = [await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                             metadata=md) for _ in range(12)]
        for s in sessions:  # affinity: every step of a session on one replica
            before = (a.calls, b.calls)
            for turn in range(3):
                await stub.Step(pb.StepRequest(session_id=s.session_id, action=f"c{turn}",
                                               expected_turn=turn), metadata=md)
            grew = (a.calls - before[0], b.calls - before[1])
            assert grew in ((3, 0), (0, 3)), grew
        assert a.calls and b.calls  # both replicas took sessions
        # replica a fails before its first token: steps fail over to b, once each
        a.fail = True
        for s in sessions:
            r = await stub.Step(pb.StepRequest(session_id=s.session_id, action="after",
                                               expected_turn=3), metadata=md)
            assert r.turn == 4 and r.observation == "did: after"
            got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id,
                                                             include_turns=True), metadata=md)
            assert [t.action for t in got.turns].count("after") == 1  # no duplicate turn
        assert replicas.healthy() == ["b"]  # ejected after its failure


async def test_round_robin_spreads_a_session_affinity_keeps_it_and_moves_are_counted() -> None:
    def routes() -> dict[str, float]:
        return {r: REGISTRY.get_sample_value("worldserve_replica_routes_total", {"result": r})
                or 0.0 for r in ("first", "same", "moved")}

    for policy, expected in (("round_robin", {"first": 1, "same": 0, "moved": 5}),
                             ("affinity", {"first": 1, "same": 5, "moved": 0})):
        a, b = Counting("a"), Counting("b")
        replicas = ReplicaSet({"a": a, "b": b}, policy=policy)
        before = routes()
        for _ in range(6):  # the same session every time
            chunks = [c async for c in replicas.stream(
                Completion("**Action:** ls<|im_end|>", 8, 0.0, 1.0, None,
                           affinity=f"s-{policy}"), 5.0)]
            assert chunks
        assert {k: v - before[k] for k, v in routes().items()} == expected
        assert sorted((a.calls, b.calls)) == ([3, 3] if policy == "round_robin" else [0, 6])
    with pytest.raises(ValueError, match="policy"):
        ReplicaSet({"a": a}, policy="random")


async def test_a_real_replica_killed_under_steps(make_settings, redis_url, triton_url,  # type: ignore[no-untyped-def]
                                                 tmp_path: Path) -> None:
    from worldserve.dev.launcher import settings_env, spawn, triton_model_ready, wait_for
    from worldserve.dev.services import free_port

    second = Settings(triton_url=f"127.0.0.1:{free_port()}", triton_http_port=free_port(),
                      triton_metrics_port=free_port())
    child = spawn("modelserver-2", "worldserve.modelserver.main", settings_env(second), tmp_path)
    try:
        await asyncio.to_thread(wait_for, "loading the second replica",
                                lambda: triton_model_ready(second.triton_url, second.model_name),
                                child, 300)
        settings = make_settings(triton_replicas=[triton_url, second.triton_url],
                                 default_max_tokens=48)
        md = auth(TEST_KEY)
        async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
            sessions = [await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                                 metadata=md) for _ in range(6)]
            for s in sessions:
                await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls",
                                               expected_turn=0), metadata=md)
            child.stop(5)  # the second replica dies
            for s in sessions:  # every session keeps stepping, on the surviving replica
                r = await stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd",
                                                   expected_turn=1), metadata=md, timeout=60)
                assert r.turn == 2
    finally:
        child.stop(5)
