"""The floor under any Python gateway: one bare gRPC hop in front of Triton (a child process).

    python bench/hop_floor.py PORT TRITON_URL

It serves `worldserve.v1.Simulator/Step` and nothing else. Each call forwards one fixed,
already rendered prompt to Triton with the gateway's own client code (`TritonBackend`) and
answers with the observation: no auth, no session, no quota, no rendering, no parsing, no
commit. `bench/gateway_overhead.py --floor` runs it as a third path; the gap between this path
and the direct one is what a second Python gRPC server on the same cores costs by itself.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import grpc

from worldserve.backends.base import Completion
from worldserve.backends.triton import TritonBackend
from worldserve.v1 import simulator_pb2, simulator_pb2_grpc


class FloorServicer(simulator_pb2_grpc.SimulatorServicer):
    def __init__(self, backend: TritonBackend, request: Completion) -> None:
        self.backend = backend
        self.request = request

    async def Step(self, request: simulator_pb2.StepRequest,
                   context: grpc.aio.ServicerContext) -> simulator_pb2.StepResponse:
        async for _chunk in self.backend.stream(self.request, 30.0):
            pass  # read to the end, as the gateway does; nothing is parsed
        return simulator_pb2.StepResponse(session_id=request.session_id, observation="ok",
                                          turn=(request.expected_turn or 0) + 1,
                                          finish_reason="stop")


async def serve(port: int, triton_url: str, request: Completion) -> None:
    backend = TritonBackend(triton_url, "worldmodel")
    server = grpc.aio.server()
    simulator_pb2_grpc.add_SimulatorServicer_to_server(FloorServicer(backend, request), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(1)
    await backend.aclose()


def main() -> None:
    from gateway_overhead import triton_request

    port, triton_url = int(sys.argv[1]), sys.argv[2]
    asyncio.run(serve(port, triton_url, triton_request()))


if __name__ == "__main__":
    main()
