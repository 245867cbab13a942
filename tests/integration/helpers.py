"""Helpers for gateway tests: a running in-process gateway and a raw stub."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc

from worldserve.backends.base import Backend
from worldserve.gateway.server import Gateway, build_gateway
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2_grpc as pb_grpc


@asynccontextmanager
async def running_gateway(settings: Settings, redis_url: str, backend: Backend | None = None
                          ) -> AsyncIterator[Gateway]:
    gateway = build_gateway(settings, redis_url, backend=backend)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop(1.0)


@asynccontextmanager
async def stub_for(gateway: Gateway) -> AsyncIterator[pb_grpc.SimulatorStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.port}") as channel:
        yield pb_grpc.SimulatorStub(channel)


def auth(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)
