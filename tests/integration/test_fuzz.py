"""Fuzzing the gRPC surface (hypothesis): 10,000 random requests from two tenants against a real
gateway and Redis. No request may end in INTERNAL/UNKNOWN, crash the gateway, or let tenant B
read anything of tenant A's session."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth
from worldserve.gateway.server import build_gateway
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration
KEY_A, KEY_B = "fuzz-key-a", "fuzz-key-b"
SECRET = "SECRET-OF-TENANT-A-7f3c"
EXAMPLES = 10_000
BAD = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


class Running:
    """Two gateways (one per tenant's key) on one Redis, served from a background loop."""

    def __init__(self, key_prefix: str, redis_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.ports: dict[str, int] = {}
        ready = threading.Event()

        async def main() -> None:
            self.gateways = []
            for key, tenant in ((KEY_A, "fuzz-a"), (KEY_B, "fuzz-b")):
                gw = build_gateway(Settings(gateway_port=0, key_prefix=key_prefix,
                                            dev_api_key=key, dev_tenant=tenant,
                                            max_sessions_per_tenant=100_000,
                                            max_turns_per_session=100_000,
                                            # examples are refused by the thousand
                                            refusals_per_second_per_key=None),
                                   redis_url, backend=EchoBackend())
                await gw.start()
                self.gateways.append(gw)
                self.ports[key] = gw.port
            ready.set()
            self.stop = asyncio.Event()
            await self.stop.wait()
            for gw in self.gateways:
                await gw.stop(1.0)

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),),
                                       daemon=True)
        self.thread.start()
        assert ready.wait(30)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)


@pytest.fixture(scope="module")
def world(key_prefix: str, redis_url: str) -> Iterator[dict[str, Any]]:
    running = Running(key_prefix, redis_url)
    channels = {k: grpc.insecure_channel(f"127.0.0.1:{p}") for k, p in running.ports.items()}
    stubs = {k: pb_grpc.SimulatorStub(c) for k, c in channels.items()}
    a = stubs[KEY_A].CreateSession(pb.CreateSessionRequest(
        domain=pb.TERMINAL, initial_state=SECRET, task_instruction=SECRET), metadata=auth(KEY_A))
    stubs[KEY_A].Step(pb.StepRequest(session_id=a.session_id, action="ls"), metadata=auth(KEY_A))
    b = stubs[KEY_B].CreateSession(pb.CreateSessionRequest(domain=pb.MCP), metadata=auth(KEY_B))
    yield {"stubs": stubs, "a": a.session_id, "b": b.session_id}
    for c in channels.values():
        c.close()
    running.close()


text = st.one_of(st.text(max_size=40), st.sampled_from(["", " ", "ls", "\x00", "{}", "[]"]),
                 st.builds(lambda c, n: c * n, st.characters(exclude_categories=("Cs",)),
                           st.integers(16_000, 70_000)))
ints = st.one_of(st.integers(-5, 300), st.integers(-(2**31), 2**31 - 1))
floats = st.floats(allow_nan=True, allow_infinity=True, width=32)


NASTY_IMPORTS = [  # non-finite numbers, deep nesting, NUL, lone surrogates, over-long strings
    *(f'{{"task": "terminal", "turn_idx": {n}, "prompt": ["ls"], "response": ["a"]}}'.encode()
      for n in ("1e400", "-1e400", "Infinity", "-Infinity", "NaN", "1.5", "true", "[1]")),
    b'{"task": "terminal", "prompt": ["ls"], "response": [' + b"[" * 5000 + b"]" * 5000 + b"]}",
    rb'{"task": "terminal", "prompt": ["l\u0000s"], "response": ["a\u0000"]}',
    rb'{"task": "terminal", "prompt": ["\ud800"], "response": ["a"]}',
    b'{"task": "terminal", "prompt": ["' + b"x" * 40_000 + b'"], "response": ["a"]}',
    b'{"task": "mcp", "prompt": [{"deep": ' + b"[" * 3000 + b"]" * 3000 + b'}], "response": []}',
]


@st.composite
def requests(draw: st.DrawFn, sids: list[str]) -> tuple[str, Any]:
    sid = draw(st.one_of(st.sampled_from(sids), text))
    sampling = pb.SamplingParams()
    if draw(st.booleans()):
        sampling.temperature = draw(floats)
        sampling.top_p = draw(floats)
        sampling.max_tokens = draw(ints)
        sampling.reasoning_budget = draw(ints)
    step = pb.StepRequest(session_id=sid, action=draw(text))
    if draw(st.booleans()):
        step.expected_turn = draw(ints)
    if draw(st.booleans()):
        step.current_state = draw(text)
    faults = pb.FaultPolicy(kinds=draw(st.lists(st.one_of(text, st.sampled_from(
        ["timeout", "http_500", "malformed_json"])), max_size=3)), rate=draw(floats),
        turns=draw(st.lists(ints, max_size=3)))
    method = draw(st.sampled_from(["CreateSession", "Step", "StreamStep", "GetSession",
                                   "ListSessions", "CloseSession", "ForkSession", "BatchStep",
                                   "ExportTrajectory", "ImportTrajectory"]))
    domain = draw(st.integers(-1, 9))
    if method == "CreateSession":
        return method, pb.CreateSessionRequest(
            domain=domain, model=draw(text), task_instruction=draw(text),
            initial_state=draw(text), sampling=sampling, faults=faults,
            ttl_seconds=draw(ints), labels=draw(st.one_of(
                st.dictionaries(text, text, max_size=3),
                st.dictionaries(st.text(max_size=8), st.text(max_size=4), min_size=60,
                                max_size=70))))
    if method in ("Step", "StreamStep"):
        return method, step
    if method == "GetSession":
        return method, pb.GetSessionRequest(session_id=sid, include_turns=draw(st.booleans()))
    if method == "ListSessions":
        return method, pb.ListSessionsRequest(page_size=draw(ints), page_token=draw(text))
    if method == "CloseSession":
        return method, pb.CloseSessionRequest(session_id=sid if sid not in sids else "s_x")
    if method == "ForkSession":
        req = pb.ForkSessionRequest(session_id=sid)
        if draw(st.booleans()):
            req.at_turn = draw(ints)
        return method, req
    if method == "BatchStep":
        req = pb.BatchStepRequest(steps=[step] * draw(st.integers(0, 3)),
                                  samples=draw(st.integers(-2, 5)))
        if draw(st.booleans()):
            req.commit = draw(st.booleans())
        return method, req
    if method == "ExportTrajectory":
        return method, pb.ExportTrajectoryRequest(session_id=sid, format=draw(st.sampled_from(
            ["", "json", "agentworldbench", "xml"])), include_forks=draw(st.booleans()))
    record = draw(st.one_of(
        st.binary(max_size=200),
        st.sampled_from(NASTY_IMPORTS),
        st.builds(lambda p, r, t, task: json.dumps({"prompt": p, "response": r, "turn_idx": t,
                                                    "task": task}).encode(),
                  st.lists(st.one_of(text, ints), max_size=3),
                  st.lists(st.one_of(text, st.none()), max_size=3), ints,
                  st.sampled_from(["terminal", "mcp", "nope", ""]))))
    return method, pb.ImportTrajectoryRequest(content=record, domain=domain)


def call(stub: pb_grpc.SimulatorStub, method: str, request: Any, key: str) -> tuple[Any, str]:
    rpc = getattr(stub, method)
    try:
        if method == "StreamStep":
            events = list(rpc(request, metadata=auth(key), timeout=10))
            return grpc.StatusCode.OK, "".join(str(e) for e in events)
        reply = rpc(request, metadata=auth(key), timeout=10)
        return grpc.StatusCode.OK, str(reply)
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""  # type: ignore[attr-defined]


def test_fuzz_the_grpc_surface(world: dict[str, Any]) -> None:
    sids = [world["a"], world["b"]]
    seen: dict[str, int] = {}

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(requests(sids), st.sampled_from([KEY_A, KEY_B]))
    def check(case: tuple[str, Any], key: str) -> None:
        method, request = case
        code, payload = call(world["stubs"][key], method, request, key)
        seen[code.name] = seen.get(code.name, 0) + 1
        assert code not in BAD, (method, request, payload)
        if key == KEY_B:
            assert SECRET not in payload, (method, request)

    check()
    assert sum(seen.values()) >= EXAMPLES
    # the gateway is still healthy afterwards, and A's session intact
    got = world["stubs"][KEY_A].GetSession(pb.GetSessionRequest(session_id=world["a"]),
                                           metadata=auth(KEY_A))
    assert got.initial_state == SECRET
