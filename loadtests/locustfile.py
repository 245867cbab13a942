"""Locust load tests of a worldserve gateway over gRPC.

    locust -f loadtests/locustfile.py --host 127.0.0.1:50051          # web UI
    make loadtest                                                     # headless, reports

Users (weights): ``EpisodeUser`` plays multi-turn episodes; ``GrpoUser`` runs GRPO-style groups
(create, step, fork ×N, step every fork, close); ``QuotaLimitedUser`` drives a tenant whose
quota is small (its RESOURCE_EXHAUSTED answers are the expected outcome and are reported as
``…(refused)``). Every gRPC call is reported to Locust by a client interceptor.

Environment: WORLDSERVE_API_KEY (tenant key), WORLDSERVE_LIMITED_API_KEY (quota-limited tenant;
its user stays idle without one), LOADTEST_TURNS (6), LOADTEST_GROUP (4), and the step-load
shape: LOADTEST_STEP_USERS (2), LOADTEST_STEP_SECONDS (20), LOADTEST_MAX_USERS (8),
LOADTEST_SECONDS (120).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc.experimental.gevent as grpc_gevent

grpc_gevent.init_gevent()  # before any gRPC object exists

import grpc  # noqa: E402
from locust import LoadTestShape, User, between, events, task  # noqa: E402

from worldserve.v1 import simulator_pb2 as pb  # noqa: E402
from worldserve.v1 import simulator_pb2_grpc as pb_grpc  # noqa: E402

TURNS = int(os.environ.get("LOADTEST_TURNS", "6"))
GROUP = int(os.environ.get("LOADTEST_GROUP", "4"))
ACTIONS = ["ls", "pwd", "cat notes.txt", "echo hi > a.txt", "wc -l notes.txt", "mkdir out",
           "grep todo notes.txt", "python3 -c 'print(6*7)'"]
EXPECTED = {grpc.StatusCode.RESOURCE_EXHAUSTED}


class _Reporting(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Reports every call (name = RPC method) with its latency and outcome to Locust."""

    def __init__(self, expected_refusals: bool) -> None:
        self.expected_refusals = expected_refusals

    def _fire(self, method: str, start: float, exc: grpc.RpcError | None, size: int) -> None:
        name = method.rsplit("/", 1)[-1]
        if exc is not None and self.expected_refusals and exc.code() in EXPECTED:
            name, exc = f"{name}(refused)", None
        events.request.fire(request_type="grpc", name=name,
                            response_time=(time.perf_counter() - start) * 1000,
                            response_length=size, exception=exc, context={})

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any,
                              request: Any) -> Any:
        start = time.perf_counter()
        call = continuation(details, request)
        try:
            response = call.result()
            self._fire(details.method, start, None, response.ByteSize())
        except grpc.RpcError as exc:
            self._fire(details.method, start, exc, 0)
        return call

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: Any,
                               request: Any) -> Any:
        start = time.perf_counter()
        stream = continuation(details, request)

        def consume() -> Iterator[Any]:
            size = 0
            try:
                for event in stream:
                    size += event.ByteSize()
                    yield event
                self._fire(details.method, start, None, size)
            except grpc.RpcError as exc:
                self._fire(details.method, start, exc, size)

        return consume()


class _GrpcUser(User):
    abstract = True
    wait_time = between(0.1, 0.5)
    key_env = "WORLDSERVE_API_KEY"
    expected_refusals = False

    def on_start(self) -> None:
        channel = grpc.intercept_channel(grpc.insecure_channel(self.host or "127.0.0.1:50051"),
                                         _Reporting(self.expected_refusals))
        self.stub = pb_grpc.SimulatorStub(channel)
        self.md = (("authorization", f"Bearer {os.environ.get(self.key_env, '')}"),)

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self.stub, method)(request, metadata=self.md, timeout=120)
        except grpc.RpcError:
            return None  # already reported

    def _session(self, domain: int = pb.TERMINAL) -> str | None:
        s = self._call("CreateSession", pb.CreateSessionRequest(
            domain=domain, task_instruction="Tidy the notes.", seed=random.randrange(2**31),
            initial_state="Working directory /home/agent contains: notes.txt",
            sampling=pb.SamplingParams(max_tokens=96)))
        return None if s is None else s.session_id


class EpisodeUser(_GrpcUser):
    weight = 3

    @task
    def episode(self) -> None:
        sid = self._session()
        if sid is None:
            return
        for turn in range(TURNS):
            request = pb.StepRequest(session_id=sid, action=random.choice(ACTIONS),
                                     expected_turn=turn)
            if turn % 2:
                for _ in self.stub.StreamStep(request, metadata=self.md, timeout=120):
                    pass
            elif self._call("Step", request) is None:
                break
        self._call("CloseSession", pb.CloseSessionRequest(session_id=sid))


class GrpoUser(_GrpcUser):
    weight = 1

    @task
    def group(self) -> None:
        sid = self._session(pb.MCP)
        if sid is None:
            return
        self._call("Step", pb.StepRequest(session_id=sid, expected_turn=0,
                                          action='{"tool": "kv_get", "arguments": {"key": "a"}}'))
        forks = [self._call("ForkSession", pb.ForkSessionRequest(session_id=sid, seed=i))
                 for i in range(GROUP)]
        live = [f.session_id for f in forks if f is not None]
        self._call("BatchStep", pb.BatchStepRequest(steps=[pb.StepRequest(
            session_id=f, expected_turn=1,
            action=f'{{"tool": "calc", "arguments": {{"expr": "{i}*7"}}}}')
            for i, f in enumerate(live)]))
        for f in [sid, *live]:
            self._call("CloseSession", pb.CloseSessionRequest(session_id=f))


class QuotaLimitedUser(_GrpcUser):
    weight = 1
    key_env = "WORLDSERVE_LIMITED_API_KEY"
    expected_refusals = True

    @task
    def hammer(self) -> None:
        if not os.environ.get(self.key_env):
            time.sleep(1)
            return
        sid = self._session()
        if sid is not None:
            self._call("Step", pb.StepRequest(session_id=sid, action="ls", expected_turn=0))
            self._call("CloseSession", pb.CloseSessionRequest(session_id=sid))


class StepLoad(LoadTestShape):
    """Add LOADTEST_STEP_USERS every LOADTEST_STEP_SECONDS up to LOADTEST_MAX_USERS."""

    step_users = int(os.environ.get("LOADTEST_STEP_USERS", "2"))
    step_seconds = float(os.environ.get("LOADTEST_STEP_SECONDS", "20"))
    max_users = int(os.environ.get("LOADTEST_MAX_USERS", "8"))
    duration = float(os.environ.get("LOADTEST_SECONDS", "120"))

    def tick(self) -> tuple[int, float] | None:
        elapsed = self.get_run_time()
        if elapsed > self.duration:
            return None
        users = min(self.max_users, self.step_users * (int(elapsed // self.step_seconds) + 1))
        return users, float(self.step_users)
