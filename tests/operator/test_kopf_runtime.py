"""The real kopf runtime against kmock: a WorldModel created in the (mock) API server is picked
up by the operator's handlers, which create its InferenceService and patch its status."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import kopf
import redis
from kubernetes import client

from tests.operator.test_reconcile import CM, ISVC, body_of, exists
from worldserve_operator import handlers
from worldserve_operator.kube import Kube
from worldserve_operator.reconcile import WorldModelReconciler
from worldserve_operator.registry import Registry

WM = "worldserve.io/v1alpha1/worldmodels"


async def test_operator_reconciles_a_worldmodel_through_kopf(kmock, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    """Public kopf API only: a fresh OperatorRegistry with the operator's handlers (and a login
    handler for kmock), settings and memo passed to ``kopf.operator``."""
    kmock.resources[ISVC] = {}
    kmock.resources[CM] = {}
    verbs = ["get", "list", "watch", "patch", "create", "delete"]
    kmock.resources[WM] = {"kind": "WorldModel", "namespaced": True, "singular": "worldmodel",
                           "verbs": verbs, "subresources": ["status"]}
    kmock.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = {
        "kind": "CustomResourceDefinition", "namespaced": False,
        "singular": "customresourcedefinition", "verbs": verbs}
    kmock.resources["v1/namespaces"] = {"kind": "Namespace", "namespaced": False,
                                        "singular": "namespace", "verbs": verbs}
    kmock.resources["worldserve.io/v1alpha1/tenants"] = {
        "kind": "Tenant", "namespaced": True, "singular": "tenant", "verbs": verbs,
        "subresources": ["status"]}
    cfg = client.Configuration()
    cfg.host = str(kmock.url).rstrip("/")
    prefix = f"wskopf-{uuid.uuid4().hex[:6]}"
    r = redis.Redis.from_url(redis_url)
    memo = kopf.Memo(worldmodels=WorldModelReconciler(Kube(client.ApiClient(cfg)),
                                                      Registry(r, prefix)))
    body = body_of("qwen-agentworld-35b-a3b-triton")
    body["metadata"]["resourceVersion"] = "1"
    kmock.objects[WM, "models", body["metadata"]["name"]] = body

    registry = handlers.register(kopf.OperatorRegistry())

    @kopf.on.login(registry=registry)
    def login(**_: object) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=str(kmock.url).rstrip("/"), insecure=True)

    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    settings.posting.enabled = False
    settings.watching.server_timeout = 5

    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(kopf.operator(registry=registry, clusterwide=True, stop_flag=stop,
                                             standalone=True, settings=settings, memo=memo))
    try:
        for _ in range(100):
            if exists(kmock, ISVC, "models", "qwen-agentworld-35b-a3b-v1"):
                break
            await asyncio.sleep(0.1)
        assert exists(kmock, ISVC, "models", "qwen-agentworld-35b-a3b-v1")
        for _ in range(50):
            status = kmock.objects[WM, "models", body["metadata"]["name"]].get("status", {})
            if status.get("summary"):
                break
            await asyncio.sleep(0.1)
        assert status["summary"] == "0/1"
        assert status["versions"]["v1"]["endpoint"].startswith("qwen-agentworld-35b-a3b-v1")
    finally:
        stop.set_result(None)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)
        for key in r.scan_iter(f"{prefix}:*"):
            r.delete(key)
        r.close()
