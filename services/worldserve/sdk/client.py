"""Python clients for the Simulator API: ``Client`` (blocking) and ``AsyncClient`` (asyncio).

    with Client("127.0.0.1:50051", api_key="…") as ws:
        s = ws.create_session("TERMINAL", initial_state="…")
        print(ws.step(s.session_id, "ls", expected_turn=0).observation)

Every gRPC error surfaces as an exception of ``worldserve.errors`` (NotFound, Aborted, …).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

import grpc

from worldserve.domains.tools import ToolSpec
from worldserve.sdk import _convert as cv
from worldserve.sdk.types import (
    BatchItem,
    BatchStep,
    Export,
    FaultPolicy,
    SessionInfo,
    StepResult,
    StreamEvent,
)
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc


def _metadata(api_key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {api_key}"),)


def tls_credentials(root_certificates: bytes | None = None, certificate: bytes | None = None,
                    private_key: bytes | None = None) -> grpc.ChannelCredentials:
    """Channel credentials for a TLS gateway (CA bundle; client cert and key for mutual TLS).

    Pass the result as ``credentials=`` to ``Client`` / ``AsyncClient``."""
    return grpc.ssl_channel_credentials(root_certificates, private_key, certificate)


class Client:
    def __init__(self, target: str = "127.0.0.1:50051", api_key: str = "",
                 timeout_s: float | None = 300.0, channel: grpc.Channel | None = None,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self._channel = channel or (grpc.secure_channel(target, credentials) if credentials
                                    else grpc.insecure_channel(target))
        self._stub = pb_grpc.SimulatorStub(self._channel)
        self._md = _metadata(api_key)
        self.timeout_s = timeout_s

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: Any, request: Any, timeout_s: float | None) -> Any:
        try:
            return method(request, metadata=self._md, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            raise cv.translate(exc) from exc

    def create_session(self, domain: str, *, task_instruction: str = "", initial_state: str = "",
                       model: str = "", system_prompt: str | None = None,
                       temperature: float | None = None, top_p: float | None = None,
                       max_tokens: int | None = None, reasoning_budget: int | None = None,
                       seed: int | None = None, labels: dict[str, str] | None = None,
                       ttl_seconds: int = 0, faults: FaultPolicy | None = None,
                       tools: Sequence[ToolSpec | Mapping[str, Any]] = ()) -> SessionInfo:
        """Opens a session. ``tools`` (MCP sessions): ToolSpecs or MCP tool dicts
        (name, description, inputSchema)."""
        req = cv.create_request(domain, task_instruction=task_instruction,
                                initial_state=initial_state, model=model,
                                system_prompt=system_prompt, temperature=temperature,
                                top_p=top_p, max_tokens=max_tokens,
                                reasoning_budget=reasoning_budget, seed=seed, labels=labels,
                                ttl_seconds=ttl_seconds, faults=faults, tools=tools)
        return cv.session_info(self._call(self._stub.CreateSession, req, None))

    def step(self, session_id: str, action: str, *, expected_turn: int | None = None,
             current_state: str | None = None, timeout_s: float | None = None) -> StepResult:
        req = cv.step_request(session_id, action, expected_turn, current_state)
        return cv.step_result(self._call(self._stub.Step, req, timeout_s))

    def stream_step(self, session_id: str, action: str, *, expected_turn: int | None = None,
                    current_state: str | None = None, timeout_s: float | None = None
                    ) -> Iterator[StreamEvent]:
        req = cv.step_request(session_id, action, expected_turn, current_state)
        try:
            for event in self._stub.StreamStep(req, metadata=self._md,
                                               timeout=timeout_s or self.timeout_s):
                yield cv.stream_event(event)
        except grpc.RpcError as exc:
            raise cv.translate(exc) from exc

    def get_session(self, session_id: str, *, include_turns: bool = False) -> SessionInfo:
        req = pb.GetSessionRequest(session_id=session_id, include_turns=include_turns)
        return cv.session_info(self._call(self._stub.GetSession, req, None))

    def close_session(self, session_id: str) -> int:
        """Closes the session; returns how many turns it had."""
        req = pb.CloseSessionRequest(session_id=session_id)
        return int(self._call(self._stub.CloseSession, req, None).turn_count)

    def fork(self, session_id: str, *, at_turn: int | None = None,
             labels: dict[str, str] | None = None, seed: int | None = None) -> SessionInfo:
        """A new session sharing the first ``at_turn`` turns (all if None), copy-on-write."""
        req = cv.fork_request(session_id, at_turn, labels, seed)
        return cv.session_info(self._call(self._stub.ForkSession, req, None))

    def batch_step(self, steps: list[BatchStep] | list[tuple[str, str]], *, commit: bool = True,
                   samples: int = 1, timeout_s: float | None = None) -> list[BatchItem]:
        """Many steps in one call; ``commit=False`` previews them (N ``samples`` each)."""
        req = cv.batch_request(steps, commit, samples)
        return cv.batch_items(self._call(self._stub.BatchStep, req, timeout_s))

    def export(self, session_id: str, *, format: str = "agentworldbench",
               include_forks: bool = False) -> Export:
        req = pb.ExportTrajectoryRequest(session_id=session_id, format=format,
                                         include_forks=include_forks)
        return cv.export_result(self._call(self._stub.ExportTrajectory, req, None))

    def import_trajectory(self, content: bytes, **options: Any) -> SessionInfo:
        """Start a session from an AgentWorldBench JSONL trajectory (its real history).

        Options: domain, model, temperature, top_p, max_tokens, seed, faults, labels,
        ttl_seconds."""
        req = cv.import_request(content, **options)
        return cv.session_info(self._call(self._stub.ImportTrajectory, req, None))


class AsyncClient:
    def __init__(self, target: str = "127.0.0.1:50051", api_key: str = "",
                 timeout_s: float | None = 300.0, channel: grpc.aio.Channel | None = None,
                 credentials: grpc.ChannelCredentials | None = None) -> None:
        self._channel = channel or (grpc.aio.secure_channel(target, credentials) if credentials
                                    else grpc.aio.insecure_channel(target))
        self._stub = pb_grpc.SimulatorStub(self._channel)
        self._md = _metadata(api_key)
        self.timeout_s = timeout_s

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, method: Any, request: Any, timeout_s: float | None) -> Any:
        try:
            return await method(request, metadata=self._md, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            raise cv.translate(exc) from exc

    async def create_session(self, domain: str, *, task_instruction: str = "",
                             initial_state: str = "", model: str = "",
                             system_prompt: str | None = None, temperature: float | None = None,
                             top_p: float | None = None, max_tokens: int | None = None,
                             reasoning_budget: int | None = None, seed: int | None = None,
                             labels: dict[str, str] | None = None,
                             ttl_seconds: int = 0, faults: FaultPolicy | None = None,
                             tools: Sequence[ToolSpec | Mapping[str, Any]] = ()
                             ) -> SessionInfo:
        req = cv.create_request(domain, task_instruction=task_instruction,
                                initial_state=initial_state, model=model,
                                system_prompt=system_prompt, temperature=temperature,
                                top_p=top_p, max_tokens=max_tokens,
                                reasoning_budget=reasoning_budget, seed=seed, labels=labels,
                                ttl_seconds=ttl_seconds, faults=faults, tools=tools)
        return cv.session_info(await self._call(self._stub.CreateSession, req, None))

    async def step(self, session_id: str, action: str, *, expected_turn: int | None = None,
                   current_state: str | None = None, timeout_s: float | None = None
                   ) -> StepResult:
        req = cv.step_request(session_id, action, expected_turn, current_state)
        return cv.step_result(await self._call(self._stub.Step, req, timeout_s))

    async def stream_step(self, session_id: str, action: str, *,
                          expected_turn: int | None = None, current_state: str | None = None,
                          timeout_s: float | None = None) -> AsyncIterator[StreamEvent]:
        req = cv.step_request(session_id, action, expected_turn, current_state)
        call = self._stub.StreamStep(req, metadata=self._md, timeout=timeout_s or self.timeout_s)
        try:
            async for event in call:
                yield cv.stream_event(event)
        except grpc.RpcError as exc:
            raise cv.translate(exc) from exc

    async def get_session(self, session_id: str, *, include_turns: bool = False) -> SessionInfo:
        req = pb.GetSessionRequest(session_id=session_id, include_turns=include_turns)
        return cv.session_info(await self._call(self._stub.GetSession, req, None))

    async def close_session(self, session_id: str) -> int:
        req = pb.CloseSessionRequest(session_id=session_id)
        return int((await self._call(self._stub.CloseSession, req, None)).turn_count)

    async def fork(self, session_id: str, *, at_turn: int | None = None,
                   labels: dict[str, str] | None = None, seed: int | None = None
                   ) -> SessionInfo:
        req = cv.fork_request(session_id, at_turn, labels, seed)
        return cv.session_info(await self._call(self._stub.ForkSession, req, None))

    async def batch_step(self, steps: list[BatchStep] | list[tuple[str, str]], *,
                         commit: bool = True, samples: int = 1, timeout_s: float | None = None
                         ) -> list[BatchItem]:
        req = cv.batch_request(steps, commit, samples)
        return cv.batch_items(await self._call(self._stub.BatchStep, req, timeout_s))

    async def export(self, session_id: str, *, format: str = "agentworldbench",
                     include_forks: bool = False) -> Export:
        req = pb.ExportTrajectoryRequest(session_id=session_id, format=format,
                                         include_forks=include_forks)
        return cv.export_result(await self._call(self._stub.ExportTrajectory, req, None))

    async def import_trajectory(self, content: bytes, **options: Any) -> SessionInfo:
        req = cv.import_request(content, **options)
        return cv.session_info(await self._call(self._stub.ImportTrajectory, req, None))
