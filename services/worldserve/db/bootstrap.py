"""First-start set-up of a database: migrations, the dev tenant and its keys (`worldserve up`)."""

from __future__ import annotations

import asyncio

from worldserve.db import migrate
from worldserve.db.repository import Repository, create_engine
from worldserve.settings import Settings


async def _register(database_url: str, settings: Settings) -> None:
    repo = Repository(create_engine(database_url))
    try:
        await repo.ensure_tenant(settings.dev_tenant, "development tenant")
        if settings.dev_api_key:
            await repo.ensure_key(settings.dev_tenant, settings.dev_api_key, "tenant", "dev key")
        if settings.admin_api_key:
            await repo.ensure_key(settings.dev_tenant, settings.admin_api_key, "admin", "admin key")
    finally:
        await repo.aclose()


def bootstrap(database_url: str, settings: Settings) -> str:
    """Migrate to head, then make sure the dev tenant and the configured keys exist."""
    revision = migrate.upgrade(database_url)
    asyncio.run(_register(database_url, settings))
    return revision
