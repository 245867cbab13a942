"""Run the operator: ``python -m worldserve_operator.main`` (or ``worldserve operator``).

Settings come from the one settings object (WORLDSERVE_*): Redis for the registry, PostgreSQL
for tenants, the key prefix, the namespaces to watch and the peering (leader election) name.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
import redis
from kubernetes import client, config

from worldserve.db.repository import Repository, create_engine
from worldserve.settings import Settings
from worldserve_operator import handlers  # noqa: F401 - registers the handlers
from worldserve_operator.kube import Kube
from worldserve_operator.reconcile import TenantReconciler, WorldModelReconciler
from worldserve_operator.registry import Registry

log = logging.getLogger(__name__)


def operator_memo(settings: Settings, api: client.ApiClient, redis_url: str,
                  database_url: str) -> kopf.Memo:
    """What every handler gets as ``memo``: the reconcilers of this process."""
    return kopf.Memo(
        worldmodels=WorldModelReconciler(
            Kube(api), Registry(redis.Redis.from_url(redis_url), settings.key_prefix)),
        tenants=TenantReconciler(Repository(create_engine(database_url))))


@kopf.on.startup()
def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Leader election: one active operator per peering; standby replicas take over.
    settings.peering.name = "worldserve-operator"
    settings.peering.mandatory = True
    settings.posting.level = logging.INFO
    settings.execution.max_workers = 8
    settings.networking.request_timeout = 30
    settings.persistence.finalizer = "worldserve.io/finalizer"


def main() -> None:
    from worldserve.dev.services import resolve_database_url, resolve_redis_url

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = Settings()
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    memo = operator_memo(settings, client.ApiClient(), resolve_redis_url(settings),
                         resolve_database_url(settings))
    namespaces = settings.operator_namespaces
    asyncio.run(kopf.operator(namespaces=namespaces, clusterwide=not namespaces, memo=memo))


if __name__ == "__main__":
    main()
