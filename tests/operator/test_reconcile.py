"""Operator reconcilers against kmock (kopf's Kubernetes mock server), the real Redis (model
registry) and the real PostgreSQL (tenants)."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

import pytest
from kubernetes import client

from tests.k8s_schemas import ROOT
from worldserve_operator.reconcile import Draining, TenantReconciler

ISVC = "serving.kserve.io/v1beta1/inferenceservices"
CM = "v1/configmaps"


def body_of(name: str) -> dict[str, Any]:
    import yaml

    doc = yaml.safe_load((ROOT / "examples" / "worldmodels" / f"{name}.yaml").read_text())
    doc["metadata"].update(uid=uuid.uuid4().hex, generation=1)
    return dict(doc)


def exists(kmock, resource: str, namespace: str, name: str) -> bool:  # type: ignore[no-untyped-def]
    """Created and not deleted since (kmock keeps a deleted object's history)."""
    try:
        return not kmock.objects[resource, namespace, name].deleted
    except KeyError:
        return False


async def test_versions_become_isvcs_registry_entries_and_status(world) -> None:  # type: ignore[no-untyped-def]
    kmock, rec, registry, _, api = world
    body = body_of("qwen-agentworld-397b-a17b-triton")
    status = await asyncio.to_thread(rec.reconcile, body)
    for v in ("v1", "v2"):
        assert exists(kmock, ISVC, "models", f"qwen-agentworld-397b-a17b-{v}")
        assert exists(kmock, CM, "models", f"qwen-agentworld-397b-a17b-{v}-repo")
    assert not exists(kmock, ISVC, "models", "no-such-isvc")
    isvc = kmock.objects[ISVC, "models", "qwen-agentworld-397b-a17b-v1"]
    assert isvc["spec"]["predictor"]["model"]["runtime"] == "worldserve-triton-vllm"
    entries = registry.entries("qwen-agentworld-397b-a17b")
    assert {k: e["weight"] for k, e in entries.items()} == {
        "qwen-agentworld-397b-a17b@v1": 90, "qwen-agentworld-397b-a17b@v2": 10}
    assert registry.r.hget(registry.aliases_key, "qwen-agentworld-397b-a17b:canary") == \
        b"qwen-agentworld-397b-a17b@v2"
    assert status["summary"] == "0/2" and status["versions"]["v1"]["state"] == "serving"
    # KServe reports v1 ready: the next reconcile shows it
    custom = client.CustomObjectsApi(api)
    await asyncio.to_thread(custom.patch_namespaced_custom_object, "serving.kserve.io",
                            "v1beta1", "models", "inferenceservices",
                            "qwen-agentworld-397b-a17b-v1",
                            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    again = await asyncio.to_thread(rec.reconcile, body)
    assert again["summary"] == "1/2" and again["versions"]["v1"]["ready"] is True
    # idempotent: nothing new appears
    live = [key for key in kmock.objects
            if key[0].plural == "inferenceservices" and exists(kmock, ISVC, key[1], key[2])]
    assert len(live) == 2


async def test_a_removed_version_drains_before_it_is_deleted(world) -> None:  # type: ignore[no-untyped-def]
    kmock, rec, registry, clock, _ = world
    body = body_of("qwen-agentworld-397b-a17b-triton")
    await asyncio.to_thread(rec.reconcile, body)
    updated = copy.deepcopy(body)
    updated["spec"]["versions"] = updated["spec"]["versions"][:1]
    updated["spec"]["aliases"] = {"stable": "v1"}
    status = await asyncio.to_thread(rec.reconcile, updated)
    v2 = registry.entries("qwen-agentworld-397b-a17b")["qwen-agentworld-397b-a17b@v2"]
    assert v2["state"] == "draining" and v2["weight"] == 0  # no new sessions land on it
    assert v2["drain_until"] == clock.now + 7200 and v2["endpoint"]  # pinned ones still route
    assert status["versions"]["v2"]["state"] == "draining"
    assert exists(kmock, ISVC, "models", "qwen-agentworld-397b-a17b-v2")
    clock.now += 3600
    await asyncio.to_thread(rec.reconcile, updated)  # still draining: the deadline holds
    assert exists(kmock, ISVC, "models", "qwen-agentworld-397b-a17b-v2")
    clock.now += 3601
    status = await asyncio.to_thread(rec.reconcile, updated)
    assert not exists(kmock, ISVC, "models", "qwen-agentworld-397b-a17b-v2")
    assert not exists(kmock, CM, "models", "qwen-agentworld-397b-a17b-v2-repo")
    assert list(registry.entries("qwen-agentworld-397b-a17b")) == ["qwen-agentworld-397b-a17b@v1"]
    assert "v2" not in status["versions"]


async def test_deleting_a_worldmodel_drains_then_removes_everything(world) -> None:  # type: ignore[no-untyped-def]
    kmock, rec, registry, clock, _ = world
    body = body_of("qwen-agentworld-35b-a3b-triton")
    await asyncio.to_thread(rec.reconcile, body)
    with pytest.raises(Draining) as info:
        await asyncio.to_thread(rec.delete, body)
    assert info.value.labels == ["qwen-agentworld-35b-a3b@v1"] and info.value.delay <= 60
    entry = registry.entries("qwen-agentworld-35b-a3b")["qwen-agentworld-35b-a3b@v1"]
    assert entry["state"] == "draining"
    clock.now += 3601
    await asyncio.to_thread(rec.delete, body)
    assert registry.entries("qwen-agentworld-35b-a3b") == {}
    assert not exists(kmock, ISVC, "models", "qwen-agentworld-35b-a3b-v1")


async def test_chat_template_from_a_configmap(world) -> None:  # type: ignore[no-untyped-def]
    _, rec, registry, _, api = world
    core = client.CoreV1Api(api)
    await asyncio.to_thread(core.create_namespaced_config_map, "models", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "templates", "namespace": "models"},
        "data": {"qwen.jinja": "{{ messages }}"}})
    body = body_of("qwen-agentworld-35b-a3b-triton")
    body["spec"]["chatTemplate"] = {"source": "configMap",
                                    "configMapRef": {"name": "templates", "key": "qwen.jinja"}}
    await asyncio.to_thread(rec.reconcile, body)
    entry = registry.entries("qwen-agentworld-35b-a3b")["qwen-agentworld-35b-a3b@v1"]
    assert entry["chat_template"] == "{{ messages }}"


async def test_tenant_resources_use_the_admin_records(database_url: str) -> None:
    from worldserve.db.repository import Repository, create_engine

    repo = Repository(create_engine(database_url))
    rec = TenantReconciler(repo)
    name = f"cr-{uuid.uuid4().hex[:6]}"
    body = {"metadata": {"name": name}, "spec": {"displayName": "From a CR", "quota": {
        "maxSessions": 7, "monthlyTokenBudget": 1000, "allowedDomains": ["WEB"]}}}
    status = await rec.reconcile(body)
    assert status == {"synced": "True", "tenantId": name, "monthTokens": 0, "disabled": False}
    info = await repo.get_tenant(name)
    assert info.quota.max_sessions == 7 and info.quota.allowed_domains == ("WEB",)
    _, secret = await repo.create_key(name)
    assert await repo.find_key(secret) is not None
    await rec.delete(body)  # deleting the resource disables the tenant: its keys stop working
    assert await repo.find_key(secret) is None
    await rec.reconcile(body)  # re-creating it brings the tenant back
    assert await repo.find_key(secret) is not None
    await repo.aclose()


async def test_a_vllm_version_becomes_an_llm_inference_service(world) -> None:  # type: ignore[no-untyped-def]
    from tests.operator.conftest import LLMISVC
    from tests.operator.test_builders import VLLM_SPEC

    kmock, rec, registry, _, api = world
    body = {"apiVersion": "worldserve.io/v1alpha1", "kind": "WorldModel",
            "metadata": {"name": "agentworld", "namespace": "models", "uid": uuid.uuid4().hex,
                         "generation": 1}, "spec": copy.deepcopy(VLLM_SPEC)}
    status = await asyncio.to_thread(rec.reconcile, body)
    assert exists(kmock, LLMISVC, "models", "agentworld-v1")
    assert not exists(kmock, ISVC, "models", "agentworld-v1")  # no InferenceService for it
    entry = registry.entries("agentworld")["agentworld@v1"]
    assert entry["protocol"] == "openai" and status["versions"]["v1"]["ready"] is False
    custom = client.CustomObjectsApi(api)
    await asyncio.to_thread(
        custom.patch_namespaced_custom_object, "serving.kserve.io", "v1alpha2", "models",
        "llminferenceservices", "agentworld-v1",
        {"status": {"url": "http://agentworld.models.example",
                    "conditions": [{"type": "Ready", "status": "True"}]}})
    again = await asyncio.to_thread(rec.reconcile, body)
    assert again["versions"]["v1"]["ready"] is True
    assert registry.entries("agentworld")["agentworld@v1"]["endpoint"] == \
        "http://agentworld.models.example"  # the address KServe reports
