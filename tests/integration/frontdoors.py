"""A gateway with tenants (real PostgreSQL and Redis) and the front doors as real processes."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from tests.integration.helpers import auth, db_gateway, make_admin_key, unique
from worldserve.backends.base import Backend
from worldserve.dev.launcher import Child, spawn, wait_for
from worldserve.dev.services import free_port, port_open
from worldserve.gateway.server import Gateway
from worldserve.settings import Settings
from worldserve.v1 import admin_pb2 as apb
from worldserve.v1 import admin_pb2_grpc as apb_grpc


@dataclass
class TenantStack:
    gateway: Gateway
    admin: apb_grpc.AdminStub
    admin_md: tuple[tuple[str, str], ...]
    settings: Settings
    backend: Backend

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.gateway.port}"

    async def tenant_key(self, quota: apb.Quota | None = None) -> str:
        """A fresh key of a new tenant (optionally with a quota)."""
        tenant_id = unique("t")
        await self.admin.CreateTenant(apb.CreateTenantRequest(tenant_id=tenant_id, quota=quota),
                                      metadata=self.admin_md)
        made = await self.admin.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant_id),
                                             metadata=self.admin_md)
        return made.secret


@asynccontextmanager
async def tenant_stack(key_prefix: str, redis_url: str, database_url: str,
                       backend: Backend) -> AsyncIterator[TenantStack]:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=None,
                        default_max_tokens=64)
    admin_md = auth(await make_admin_key(database_url))
    async with db_gateway(settings, redis_url, database_url, backend) as gw, \
            grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
        yield TenantStack(gw, apb_grpc.AdminStub(channel), admin_md, settings, backend)


@contextmanager
def front_door(module: str, gateway_target: str, log_dir: Path, port_setting: str,
               python: str = sys.executable) -> Iterator[int]:
    """Run a front door (``python -m module``) against the gateway; yields its HTTP port."""
    import os

    port = free_port()
    env = dict(os.environ, WORLDSERVE_UPSTREAM_GATEWAY=gateway_target, PYTHONUNBUFFERED="1",
               **{f"WORLDSERVE_{port_setting.upper()}": str(port)})
    child: Child = spawn(module.rsplit(".", 1)[-1], module, env, log_dir, python=python)
    try:
        wait_for(f"starting {module}", lambda: port_open("127.0.0.1", port), child, 60)
        yield port
    finally:
        child.stop(5)
