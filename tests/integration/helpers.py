"""Helpers for gateway tests: a running in-process gateway and a raw stub."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import redis

from worldserve.accounting.sink import PostgresSink
from worldserve.accounting.worker import Worker
from worldserve.backends.base import Backend
from worldserve.gateway.server import Gateway, build_gateway
from worldserve.settings import Settings
from worldserve.v1 import admin_pb2_grpc as admin_grpc
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


async def code_of(awaitable: object) -> grpc.StatusCode:
    """The status code an RPC ends with (OK when it succeeds)."""
    try:
        await awaitable  # type: ignore[misc]
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


@asynccontextmanager
async def admin_stub_for(gateway: Gateway) -> AsyncIterator[admin_grpc.AdminStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.port}") as channel:
        yield admin_grpc.AdminStub(channel)


@asynccontextmanager
async def db_gateway(settings: Settings, redis_url: str, database_url: str,
                     backend: Backend | None = None) -> AsyncIterator[Gateway]:
    """A gateway whose keys and quotas come from PostgreSQL (the Admin API works)."""
    gateway = build_gateway(settings, redis_url, backend=backend, database_url=database_url)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop(1.0)


async def make_admin_key(database_url: str) -> str:
    """An admin-role key of the `ops` tenant, written straight into the database."""
    from worldserve.db.repository import Repository, create_engine

    repo = Repository(create_engine(database_url))
    try:
        await repo.ensure_tenant("ops", "operators")
        _, secret = await repo.create_key("ops", "admin", "test admin")
        return secret
    finally:
        await repo.aclose()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def drain_usage(redis_url: str, database_url: str, prefix: str) -> Worker:
    """Run an accounting worker in-process until the usage stream is empty."""
    client = redis.Redis.from_url(redis_url)
    worker = Worker(client, PostgresSink(database_url), prefix, unique("w"), batch_size=500,
                    block_ms=100)
    worker.ensure_group()
    while worker.run_once(block_ms=100):
        pass
    worker.sink.close()
    client.close()
    return worker


class TcpProxy:
    """A TCP forwarder whose link can be cut and restored: a database going away, for real."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._links |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def cut(self) -> None:
        """Refuse new connections and drop the open ones."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in self._links:
            writer.close()
        self._links.clear()
