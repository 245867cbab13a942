"""The Admin servicer (admin-role keys only; the auth interceptor enforces the role)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TypeAlias

import grpc

from worldserve.db.repository import Repository
from worldserve.errors import DatabaseUnavailable, InvalidArgument
from worldserve.gateway import admin_convert as convert
from worldserve.tenancy import inputs
from worldserve.v1 import admin_pb2 as pb
from worldserve.v1 import admin_pb2_grpc as pb_grpc

Ctx: TypeAlias = grpc.aio.ServicerContext


def _tenant(tenant_id: str) -> str:
    return inputs.lookup("tenant_id", tenant_id, inputs.TENANT_ID_MAX)


class AdminServicer(pb_grpc.AdminServicer):
    def __init__(self, repo: Repository | None,
                 models: Callable[[], list[tuple[str, list[str]]]],
                 domains: Callable[[str], tuple[str, ...]] = lambda _label: ()) -> None:
        self._repo = repo
        self._models = models
        self._domains = domains

    @property
    def repo(self) -> Repository:
        if self._repo is None:
            raise DatabaseUnavailable("this gateway has no database (WORLDSERVE_DATABASE_URL)")
        return self._repo

    async def CreateTenant(self, request: pb.CreateTenantRequest, context: Ctx) -> pb.Tenant:
        quota = convert.quota_spec(request.quota) if request.HasField("quota") else None
        return convert.tenant_pb(await self.repo.create_tenant(
            request.tenant_id, request.display_name, request.default_model, quota))

    async def GetTenant(self, request: pb.GetTenantRequest, context: Ctx) -> pb.Tenant:
        return convert.tenant_pb(await self.repo.get_tenant(_tenant(request.tenant_id)))

    async def ListTenants(self, request: pb.ListTenantsRequest, context: Ctx
                          ) -> pb.ListTenantsResponse:
        tenants = await self.repo.list_tenants()
        return pb.ListTenantsResponse(tenants=[convert.tenant_pb(t) for t in tenants])

    async def SetQuota(self, request: pb.SetQuotaRequest, context: Ctx) -> pb.Quota:
        spec = await self.repo.set_quota(_tenant(request.tenant_id),
                                         convert.quota_spec(request.quota))
        return convert.quota_pb(spec)

    async def CreateApiKey(self, request: pb.CreateApiKeyRequest, context: Ctx
                           ) -> pb.CreateApiKeyResponse:
        info, secret = await self.repo.create_key(
            _tenant(request.tenant_id), inputs.text("role", request.role or "tenant"),
            inputs.text("name", request.name))
        return pb.CreateApiKeyResponse(key=convert.key_pb(info), secret=secret)

    async def ListApiKeys(self, request: pb.ListApiKeysRequest, context: Ctx
                          ) -> pb.ListApiKeysResponse:
        keys = await self.repo.list_keys(_tenant(request.tenant_id) if request.tenant_id else "")
        return pb.ListApiKeysResponse(keys=[convert.key_pb(k) for k in keys])

    async def RevokeApiKey(self, request: pb.RevokeApiKeyRequest, context: Ctx) -> pb.ApiKey:
        key_id = inputs.lookup("key_id", request.key_id, inputs.KEY_ID_MAX)
        return convert.key_pb(await self.repo.revoke_key(key_id))

    async def GetUsage(self, request: pb.GetUsageRequest, context: Ctx) -> pb.GetUsageResponse:
        if not request.tenant_id:
            raise InvalidArgument("tenant_id is required")
        now = dt.datetime.now(dt.UTC)
        start = (convert.instant("start", request.start) if request.HasField("start")
                 else now.replace(day=1, hour=0, minute=0, second=0, microsecond=0))
        end = convert.instant("end", request.end) if request.HasField("end") else now
        rows = await self.repo.usage(_tenant(request.tenant_id), start, end,
                                     inputs.text("group_by", request.group_by or "model"))
        return pb.GetUsageResponse(rows=[convert.usage_pb(r) for r in rows])

    async def ListModels(self, request: pb.ListModelsRequest, context: Ctx
                         ) -> pb.ListModelsResponse:
        return pb.ListModelsResponse(models=[pb.Model(version=v, aliases=a,
                                                      domains=self._domains(v))
                                             for v, a in self._models()])
