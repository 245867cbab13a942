"""The Simulator servicer: thin protobuf adapters over the simulator core."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.struct_pb2 import Struct

from worldserve.errors import InvalidArgument, ResourceExhausted
from worldserve.gateway import convert, trajectories
from worldserve.gateway.batch import run_batch
from worldserve.gateway.interceptors import current_tenant, status_code
from worldserve.gateway.simulator import Simulator, StepResult
from worldserve.sessions.limits import MAX_REPLY_BYTES
from worldserve.sessions.lineage import base_count
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc

MAX_PAGE = 500


def _fits(message: Any, what: str) -> Any:
    """Refuse a reply the channel could not carry, with a hint instead of a transport error."""
    size = message.ByteSize()
    if size > MAX_REPLY_BYTES:
        raise ResourceExhausted(f"{what} is {size} bytes, over the {MAX_REPLY_BYTES}-byte reply "
                                "limit", subject="reply:bytes")
    return message


def _timeout(context: grpc.aio.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    return remaining if remaining is not None and remaining < 1e8 else None


class SimulatorServicer(pb_grpc.SimulatorServicer):
    def __init__(self, simulator: Simulator) -> None:
        self.sim = simulator

    async def CreateSession(self, request: pb.CreateSessionRequest,
                            context: grpc.aio.ServicerContext) -> pb.Session:
        record = await self.sim.create_session(current_tenant.get(), convert.new_session(request))
        return convert.session_pb(record, 0)

    async def Step(self, request: pb.StepRequest, context: grpc.aio.ServicerContext
                   ) -> pb.StepResponse:
        async for event in self.sim.step(current_tenant.get(), convert.step_input(request),
                                         _timeout(context)):
            if isinstance(event, StepResult):
                return convert.step_response(event)
        raise AssertionError("a step always ends with its result")

    async def StreamStep(self, request: pb.StepRequest, context: grpc.aio.ServicerContext
                         ) -> AsyncIterator[pb.StepEvent]:
        async for event in self.sim.step(current_tenant.get(), convert.step_input(request),
                                         _timeout(context)):
            yield convert.step_event(event)

    async def GetSession(self, request: pb.GetSessionRequest,
                         context: grpc.aio.ServicerContext) -> pb.Session:
        record, turns, count = await self.sim.get_session(
            current_tenant.get(), request.session_id, request.include_turns)
        return _fits(convert.session_pb(record, count, turns),
                     "the session with its turns (read them in an export instead)")

    async def ListSessions(self, request: pb.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> pb.ListSessionsResponse:
        size = request.page_size or 50
        if not 0 < size <= MAX_PAGE:
            raise InvalidArgument(f"page_size must be within [1, {MAX_PAGE}]")
        token = request.page_token or "0"
        if not (token.isascii() and token.isdigit() and len(token) <= 9):
            raise InvalidArgument("page_token is not one this server issued")
        offset = int(token)
        page, next_offset = await self.sim.list_sessions(current_tenant.get(), offset, size)
        return pb.ListSessionsResponse(
            sessions=[convert.session_pb(r, n) for r, n in page],
            next_page_token="" if next_offset is None else str(next_offset))

    async def CloseSession(self, request: pb.CloseSessionRequest,
                           context: grpc.aio.ServicerContext) -> pb.CloseSessionResponse:
        count = await self.sim.close_session(current_tenant.get(), request.session_id)
        return pb.CloseSessionResponse(session_id=request.session_id, turn_count=count)

    async def ForkSession(self, request: pb.ForkSessionRequest,
                          context: grpc.aio.ServicerContext) -> pb.Session:
        child = await self.sim.fork_session(
            current_tenant.get(), request.session_id,
            request.at_turn if request.HasField("at_turn") else None, dict(request.labels),
            request.seed if request.HasField("seed") else None,
            keep_seed=not request.HasField("seed"))
        return convert.session_pb(child, base_count(child.lineage))

    async def BatchStep(self, request: pb.BatchStepRequest,
                        context: grpc.aio.ServicerContext) -> pb.BatchStepResponse:
        commit = request.commit if request.HasField("commit") else True
        outcomes = await run_batch(self.sim, current_tenant.get(),
                                   [convert.step_input(s) for s in request.steps], commit,
                                   request.samples, _timeout(context))
        items = []
        for o in outcomes:
            item = pb.BatchStepItem(request_index=o.request_index, sample_index=o.sample)
            if o.result is not None:
                item.response.CopyFrom(convert.step_response(o.result))
            elif o.error is not None:
                item.code = status_code(o.error).value[0]
                item.message = str(o.error)
            items.append(item)
        return pb.BatchStepResponse(items=items)

    async def ExportTrajectory(self, request: pb.ExportTrajectoryRequest,
                               context: grpc.aio.ServicerContext) -> pb.ExportTrajectoryResponse:
        content, summary = await trajectories.export(
            self.sim, current_tenant.get(), request.session_id, request.format,
            request.include_forks)
        metadata = Struct()
        metadata.update(summary)  # type: ignore[arg-type]
        return _fits(pb.ExportTrajectoryResponse(format=str(summary["format"]), content=content,
                                                 metadata=metadata),
                     "the export (export fewer forks or a subtree)")

    async def ImportTrajectory(self, request: pb.ImportTrajectoryRequest,
                               context: grpc.aio.ServicerContext) -> pb.Session:
        record, count = await trajectories.import_trajectory(
            self.sim, current_tenant.get(), request.content, request.format,
            convert.new_session(request))
        return convert.session_pb(record, count)
