"""Reconcilers: what to do for a WorldModel or a Tenant, independent of kopf's wiring.

Idempotent: running one twice changes nothing the second time. They return the status to
write; kopf's handlers only pass bodies in and patches out.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worldserve.db.repository import Repository
from worldserve.errors import NotFound
from worldserve.tenancy.records import QuotaSpec
from worldserve_operator import builders, gate
from worldserve_operator.kube import KSERVE, LLM, Kube
from worldserve_operator.registry import Registry
from worldserve_operator.specs import parse_tenant, parse_worldmodel, traffic_weights


@dataclass
class Draining(Exception):
    """Versions still draining: come back in ``delay`` seconds."""

    delay: float
    labels: list[str]


def _isvc_ready(isvc: dict[str, Any] | None) -> tuple[bool, str]:
    if not isvc:
        return False, "missing"
    for cond in isvc.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True", str(cond.get("reason") or cond.get("status"))
    return False, "pending"


class WorldModelReconciler:
    def __init__(self, kube: Kube, registry: Registry,
                 clock: Callable[[], float] = time.time) -> None:
        self.kube = kube
        self.registry = registry
        self.clock = clock

    def _chat_template(self, body: dict[str, Any], spec: Any) -> str:
        if spec.chat_template_source == "inline":
            return str(spec.chat_template_inline)
        if spec.chat_template_source == "configMap":
            name, key = spec.chat_template_configmap
            return self.kube.read_configmap_key(body["metadata"]["namespace"], name, key)
        return ""  # the checkpoint's own template

    def reconcile(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        namespace = meta["namespace"]
        spec = parse_worldmodel(meta["name"], body.get("spec", {}))
        previous = (body.get("status") or {}).get("stable", "")
        if previous and spec.version(previous) is None:
            previous = ""  # the old stable version was removed: nothing to fall back to
        stable, blocked = gate.effective_stable(spec.stable, previous,
                                                gate.parse_gate(body.get("spec", {})),
                                                dict(meta.get("annotations") or {}))
        spec = dataclasses.replace(spec, stable=stable)
        applied: dict[str, dict[str, Any] | None] = {}
        for v in spec.versions:
            if v.runtime == "vllm":  # KServe's LLM track
                applied[v.name] = self.kube.apply_isvc(
                    builders.llm_inference_service(spec, v, namespace, body), LLM)
                continue
            if v.runtime == "triton-vllm":
                self.kube.apply_configmap(builders.model_repository(spec, v, namespace, body))
            applied[v.name] = self.kube.apply_isvc(builders.inference_service(spec, v, namespace,
                                                                               body))
        weights = traffic_weights(spec)
        # An LLMInferenceService reports where it answers (status.url): that wins.
        addresses = {v.name: str(url) for v in spec.versions if v.runtime == "vllm"
                     and (url := ((applied[v.name] or {}).get("status") or {}).get("url"))}
        entries = builders.registry_entries(spec, namespace, self._chat_template(body, spec),
                                            weights, addresses)
        now = self.clock()
        draining = self.registry.sync(spec.name, entries, builders.aliases(spec), now,
                                      spec.drain_seconds)
        expired = [label for label, until in draining.items() if until <= now]
        for label in expired:
            version = label.split("@", 1)[1]
            name = builders.resource_name(spec.name, version)
            self.kube.delete_isvc(namespace, name)
            self.kube.delete_isvc(namespace, name, LLM)
            self.kube.delete_configmap(namespace, f"{name}-repo")
        self.registry.remove(expired, spec.name)
        status_versions = {}
        for v in spec.versions:
            # the object the create/patch answered carries its status; read only if it did not
            isvc = applied[v.name] or self.kube.get_isvc(
                namespace, builders.resource_name(spec.name, v.name),
                LLM if v.runtime == "vllm" else KSERVE)
            ready, reason = _isvc_ready(isvc)
            status_versions[v.name] = {
                "ready": ready, "reason": reason, "weight": weights.get(v.name, 0),
                "endpoint": builders.endpoint(spec, v, namespace), "state": "serving",
                "replicas": int(((isvc or {}).get("status", {}).get("components", {})
                                 .get("predictor", {}) or {}).get("replicas", 0) or 0)}
        for label, until in draining.items():
            if label not in expired:
                status_versions[label.split("@", 1)[1]] = {
                    "ready": False, "state": "draining", "weight": 0, "drainUntil": until}
        n_ready = sum(1 for s in status_versions.values() if s.get("ready"))
        return {"versions": status_versions, "summary": f"{n_ready}/{len(spec.versions)}",
                "observedGeneration": meta.get("generation", 0), "stable": spec.stable,
                "promotion": blocked or "ok"}

    def delete(self, body: dict[str, Any]) -> None:
        """Deleting a WorldModel drains every version first (no new sessions), then removes
        them; raises Draining while pinned sessions may still be using one."""
        meta = body["metadata"]
        spec = parse_worldmodel(meta["name"], body.get("spec", {}))
        now = self.clock()
        draining = self.registry.sync(spec.name, {}, {}, now, spec.drain_seconds)
        waiting = {label: until for label, until in draining.items() if until > now}
        if waiting:
            raise Draining(min(min(waiting.values()) - now, 60.0), sorted(waiting))
        self.registry.remove_model(spec.name)
        for v in spec.versions:  # owner references would do this too; be explicit
            name = builders.resource_name(spec.name, v.name)
            self.kube.delete_isvc(meta["namespace"], name)
            self.kube.delete_isvc(meta["namespace"], name, LLM)
            self.kube.delete_configmap(meta["namespace"], f"{name}-repo")


class TenantReconciler:
    """Tenant resources go through the same records as the Admin API."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo

    async def reconcile(self, body: dict[str, Any]) -> dict[str, Any]:
        t = parse_tenant(body["metadata"]["name"], body.get("spec", {}))
        await self.repo.ensure_tenant(t.tenant_id, t.display_name)
        await self.repo.enable_tenant(t.tenant_id)  # the resource exists: the tenant is live
        q = dict(t.quota)
        for key in ("allowed_models", "allowed_domains"):
            if q.get(key) is not None:
                q[key] = tuple(q[key])
        await self.repo.set_quota(t.tenant_id, QuotaSpec(**q))
        return await self.status(body)

    async def status(self, body: dict[str, Any]) -> dict[str, Any]:
        t = parse_tenant(body["metadata"]["name"], body.get("spec", {}))
        try:
            info = await self.repo.get_tenant(t.tenant_id)
        except NotFound:
            return {"synced": "False", "tenantId": t.tenant_id}
        return {"synced": "True", "tenantId": t.tenant_id, "monthTokens": info.month_tokens,
                "disabled": info.disabled}

    async def delete(self, body: dict[str, Any]) -> None:
        t = parse_tenant(body["metadata"]["name"], body.get("spec", {}))
        await self.repo.disable_tenant(t.tenant_id)
