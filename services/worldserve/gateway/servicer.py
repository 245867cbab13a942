"""The Simulator servicer: thin protobuf adapters over the simulator core."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from worldserve.errors import InvalidArgument
from worldserve.gateway import convert
from worldserve.gateway.interceptors import current_tenant
from worldserve.gateway.simulator import Simulator, StepResult
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc

MAX_PAGE = 500


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
        return convert.session_pb(record, count, turns)

    async def ListSessions(self, request: pb.ListSessionsRequest,
                           context: grpc.aio.ServicerContext) -> pb.ListSessionsResponse:
        size = request.page_size or 50
        if not 0 < size <= MAX_PAGE:
            raise InvalidArgument(f"page_size must be within [1, {MAX_PAGE}]")
        try:
            offset = int(request.page_token or 0)
        except ValueError:
            raise InvalidArgument("page_token is not one this server issued") from None
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
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "ForkSession is not implemented yet")
        raise AssertionError

    async def BatchStep(self, request: pb.BatchStepRequest,
                        context: grpc.aio.ServicerContext) -> pb.BatchStepResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "BatchStep is not implemented yet")
        raise AssertionError

    async def ExportTrajectory(self, request: pb.ExportTrajectoryRequest,
                               context: grpc.aio.ServicerContext) -> pb.ExportTrajectoryResponse:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                            "ExportTrajectory is not implemented yet")
        raise AssertionError
