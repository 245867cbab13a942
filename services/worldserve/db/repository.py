"""Every PostgreSQL query of the gateway and the Admin API (async SQLAlchemy over psycopg 3).

Database errors are translated at this boundary: connection trouble → DatabaseUnavailable, a
taken tenant id → AlreadyExists, a missing one → NotFound.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from worldserve.db.models import ApiKey, Quota, Tenant, UsageHourly
from worldserve.db.urls import sync_url
from worldserve.errors import AlreadyExists, DatabaseUnavailable, InvalidArgument, NotFound
from worldserve.quota.limits import month_bounds
from worldserve.tenancy import inputs
from worldserve.tenancy.keys import ROLES, NewKey, Principal, generate_key, key_prefix, matches
from worldserve.tenancy.records import GROUPINGS, KeyInfo, QuotaSpec, TenantInfo, UsageRow

_QUOTA_FIELDS = ("max_sessions", "max_inflight_steps", "tokens_per_minute",
                 "monthly_token_budget", "allowed_models", "allowed_domains")


def create_engine(url: str) -> AsyncEngine:
    return create_async_engine(sync_url(url), pool_size=5, max_overflow=5, pool_pre_ping=True,
                               connect_args={"connect_timeout": 5})


_QUOTA_COLUMNS = [getattr(Quota, f) for f in _QUOTA_FIELDS] + [
    Quota.tenant_id.label("quota_tenant")]


def _quota(row: Any) -> QuotaSpec:
    """A QuotaSpec from a row carrying the quota columns (all NULL when the tenant has none)."""
    if row is None:
        return QuotaSpec()
    values = {f: getattr(row, f) for f in _QUOTA_FIELDS}
    for f in ("allowed_models", "allowed_domains"):
        if values[f] is not None:
            values[f] = tuple(values[f])
    return QuotaSpec(**values)


def _key(row: Any) -> KeyInfo:
    return KeyInfo(row.id, row.tenant_id, row.prefix, row.role, row.name, row.created_at,
                   row.last_used_at, row.revoked_at)


def _quota_values(spec: QuotaSpec) -> dict[str, Any]:
    values: dict[str, Any] = {f: getattr(spec, f) for f in _QUOTA_FIELDS}
    for f in ("allowed_models", "allowed_domains"):
        if values[f] is not None:
            values[f] = list(values[f])
    return values


class Repository:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncConnection]:
        try:
            async with self.engine.begin() as conn:
                yield conn
        except IntegrityError:
            raise
        except (OperationalError, OSError) as exc:
            raise DatabaseUnavailable(f"PostgreSQL unreachable: {exc}") from exc
        except DBAPIError as exc:
            if exc.connection_invalidated:
                raise DatabaseUnavailable(f"PostgreSQL connection lost: {exc}") from exc
            raise

    async def aclose(self) -> None:
        await self.engine.dispose()

    # --- authentication ---

    async def find_key(self, key: str) -> Principal | None:
        """The principal of a live key (not revoked, tenant not disabled), else None."""
        async with self._tx() as conn:
            rows = (await conn.execute(
                select(ApiKey.id, ApiKey.tenant_id, ApiKey.role, ApiKey.secret_hash)
                .join(Tenant, Tenant.id == ApiKey.tenant_id)
                .where(ApiKey.prefix == key_prefix(key), ApiKey.revoked_at.is_(None),
                       Tenant.disabled_at.is_(None)))).all()
            found = None
            for row in rows:  # compare with every candidate: no early exit on a match
                if matches(key, row.secret_hash):
                    found = Principal(row.tenant_id, row.role, row.id)
            if found is not None:
                await conn.execute(update(ApiKey).where(ApiKey.id == found.key_id)
                                   .values(last_used_at=func.now()))
            return found

    # --- tenants ---

    async def create_tenant(self, tenant_id: str, display_name: str = "", default_model: str = "",
                            quota: QuotaSpec | None = None) -> TenantInfo:
        """A new tenant, with its quota when given: both written in one transaction."""
        inputs.tenant_id(tenant_id)
        inputs.text("display_name", display_name)
        inputs.text("default_model", default_model)
        values = _quota_values(inputs.quota(quota)) if quota is not None else None
        try:
            async with self._tx() as conn:
                await conn.execute(insert(Tenant).values(id=tenant_id, display_name=display_name,
                                                         default_model=default_model))
                if values is not None:
                    await conn.execute(insert(Quota).values(tenant_id=tenant_id, **values))
        except IntegrityError as exc:
            raise AlreadyExists(f"tenant {tenant_id} already exists") from exc
        return await self.get_tenant(tenant_id)

    async def ensure_tenant(self, tenant_id: str, display_name: str = "") -> None:
        async with self._tx() as conn:
            await conn.execute(insert(Tenant).values(id=tenant_id, display_name=display_name)
                               .on_conflict_do_nothing())

    async def get_tenant(self, tenant_id: str, now: dt.datetime | None = None) -> TenantInfo:
        async with self._tx() as conn:
            row = (await conn.execute(select(Tenant).where(Tenant.id == tenant_id))).first()
            if row is None:
                raise NotFound(f"tenant {tenant_id} not found")
            quota = (await conn.execute(select(Quota).where(Quota.tenant_id == tenant_id))).first()
        now = now or dt.datetime.now(dt.UTC)
        month = now.strftime("%Y%m")
        return TenantInfo(row.id, row.display_name, row.default_model, row.created_at,
                          row.disabled_at is not None, _quota(quota),
                          await self.month_tokens(tenant_id, month))

    async def enable_tenant(self, tenant_id: str) -> None:
        async with self._tx() as conn:
            await conn.execute(update(Tenant).where(Tenant.id == tenant_id)
                               .values(disabled_at=None))

    async def disable_tenant(self, tenant_id: str) -> None:
        """Keys of a disabled tenant stop authenticating; its usage history is kept."""
        async with self._tx() as conn:
            await conn.execute(update(Tenant).where(Tenant.id == tenant_id,
                                                    Tenant.disabled_at.is_(None))
                               .values(disabled_at=func.now()))

    async def list_tenants(self) -> list[TenantInfo]:
        async with self._tx() as conn:
            rows = (await conn.execute(
                select(Tenant.id, Tenant.display_name, Tenant.default_model, Tenant.created_at,
                       Tenant.disabled_at, *_QUOTA_COLUMNS)
                .outerjoin(Quota, Quota.tenant_id == Tenant.id).order_by(Tenant.id))).all()
        return [TenantInfo(r.id, r.display_name, r.default_model, r.created_at,
                           r.disabled_at is not None, _quota(r)) for r in rows]

    # --- quotas ---

    async def quota(self, tenant_id: str) -> QuotaSpec | None:
        """The stored quota (defaults where unset), or None when the tenant does not exist."""
        async with self._tx() as conn:
            row = (await conn.execute(
                select(Tenant.id, *_QUOTA_COLUMNS).outerjoin(Quota, Quota.tenant_id == Tenant.id)
                .where(Tenant.id == tenant_id, Tenant.disabled_at.is_(None)))).first()
        if row is None:
            return None
        return _quota(row)

    async def set_quota(self, tenant_id: str, spec: QuotaSpec) -> QuotaSpec:
        values = _quota_values(inputs.quota(spec))
        stmt = insert(Quota).values(tenant_id=tenant_id, **values)
        stmt = stmt.on_conflict_do_update(index_elements=[Quota.tenant_id],
                                          set_={**values, "updated_at": func.now()})
        try:
            async with self._tx() as conn:
                await conn.execute(stmt)
        except IntegrityError as exc:
            raise NotFound(f"tenant {tenant_id} not found") from exc
        return spec

    # --- keys ---

    async def create_key(self, tenant_id: str, role: str = "tenant", name: str = "",
                         secret: str | None = None) -> tuple[KeyInfo, str]:
        if role not in ROLES:
            raise InvalidArgument(f"role must be one of {', '.join(ROLES)}")
        new: NewKey = generate_key(secret)
        try:
            async with self._tx() as conn:
                row = (await conn.execute(insert(ApiKey).values(
                    id=new.key_id, tenant_id=tenant_id, prefix=new.prefix,
                    secret_hash=new.secret_hash, role=role, name=name).returning(ApiKey))).one()
        except IntegrityError as exc:
            raise NotFound(f"tenant {tenant_id} not found") from exc
        return _key(row), new.secret

    async def ensure_key(self, tenant_id: str, secret: str, role: str, name: str) -> None:
        """Register a given key (the dev/admin key of `worldserve up`) unless it is already."""
        if await self.find_key(secret) is None:
            await self.create_key(tenant_id, role, name, secret)

    async def list_keys(self, tenant_id: str = "") -> list[KeyInfo]:
        query = select(ApiKey).order_by(ApiKey.created_at)
        if tenant_id:
            query = query.where(ApiKey.tenant_id == tenant_id)
        async with self._tx() as conn:
            return [_key(r) for r in (await conn.execute(query)).all()]

    async def revoke_key(self, key_id: str) -> KeyInfo:
        async with self._tx() as conn:
            await conn.execute(update(ApiKey).where(ApiKey.id == key_id,
                                                    ApiKey.revoked_at.is_(None))
                               .values(revoked_at=func.now()))
            row = (await conn.execute(select(ApiKey).where(ApiKey.id == key_id))).first()
        if row is None:
            raise NotFound(f"API key {key_id} not found")
        return _key(row)

    # --- usage ---

    async def month_tokens(self, tenant_id: str, month: str) -> int:
        start, end = month_bounds(month)
        async with self._tx() as conn:
            total = (await conn.execute(
                select(func.coalesce(func.sum(UsageHourly.input_tokens + UsageHourly.output_tokens),
                                     0))
                .where(UsageHourly.tenant_id == tenant_id, UsageHourly.hour >= start,
                       UsageHourly.hour < end))).scalar_one()
        return int(total)

    async def usage(self, tenant_id: str, start: dt.datetime, end: dt.datetime, by: str
                    ) -> list[UsageRow]:
        """Usage from the hourly rollups in [start, end) (hour resolution), grouped ``by``."""
        if by not in GROUPINGS:
            raise InvalidArgument(f"group by one of {', '.join(GROUPINGS)}")
        inputs.period(start, end)
        h = UsageHourly
        group: Any = {"model": h.model_version, "domain": h.domain,
                      "day": func.to_char(func.timezone("UTC", h.hour), "YYYY-MM-DD")}[by]
        query = (select(group.label("g"), func.sum(h.steps), func.sum(h.input_tokens),
                        func.sum(h.output_tokens), func.sum(h.reasoning_tokens),
                        func.sum(h.faults), func.sum(h.errors))
                 .where(h.tenant_id == tenant_id, h.hour >= start.replace(minute=0, second=0,
                                                                          microsecond=0),
                        h.hour < end)
                 .group_by("g").order_by("g"))
        async with self._tx() as conn:
            rows = (await conn.execute(query)).all()
        return [UsageRow(str(r[0]), *(int(v) for v in r[1:])) for r in rows]
