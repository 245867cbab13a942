"""WorldModel and Tenant specs as typed data (pure), with the CRD defaults applied."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from worldserve.domains.modelcard import normalize_domains

GROUP = "worldserve.io"
VERSION = "v1alpha1"


@dataclass(frozen=True, slots=True)
class Autoscaling:
    signal: str = "concurrency"  # concurrency | rps | queue-depth
    target: int = 8
    prometheus_address: str = ""


@dataclass(frozen=True, slots=True)
class ModelVersion:
    name: str
    storage_uri: str
    runtime: str = "triton-vllm"
    image: str = ""
    tensor_parallel_size: int = 1
    max_model_len: int = 32768
    gpu_memory_utilization: float = 0.9
    gpus: int = 1
    gpu_resource: str = "nvidia.com/gpu"
    cpu: str = "8"
    memory: str = "64Gi"
    shared_memory: str = "16Gi"
    node_selector: dict[str, str] = field(default_factory=dict)
    min_replicas: int = 1
    max_replicas: int = 1
    autoscaling: Autoscaling = field(default_factory=Autoscaling)
    traffic_percent: int | None = None
    chat_template: str = ""
    domains: tuple[str, ...] = ()  # what the version simulates; () = the model-level list
    # runtime vllm (KServe LLMInferenceService): data/expert parallelism and vLLM's arguments
    data_parallel_size: int = 1
    expert_parallel: bool = False
    reasoning_parser: str = "qwen3"
    vllm_args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WorldModelSpec:
    name: str  # model name sessions use: name@version
    versions: list[ModelVersion]
    stable: str = ""
    canary: str = ""
    canary_percent: int = 10
    chat_template_source: str = "checkpoint"
    chat_template_configmap: tuple[str, str] | None = None
    chat_template_inline: str = ""
    drain_seconds: int = 3600
    domains: tuple[str, ...] = ()  # what the checkpoint's model card declares; () = every domain

    def domains_of(self, v: ModelVersion) -> tuple[str, ...]:
        return v.domains or self.domains

    def version(self, name: str) -> ModelVersion | None:
        return next((v for v in self.versions if v.name == name), None)


class SpecError(ValueError):
    """The resource is invalid in a way the CRD schema cannot express."""


def _domains(raw: Any) -> tuple[str, ...]:
    if not raw:
        return ()
    try:
        return normalize_domains(raw)
    except ValueError as exc:
        raise SpecError(str(exc)) from exc


def parse_worldmodel(name: str, spec: dict[str, Any]) -> WorldModelSpec:
    versions = []
    for raw in spec.get("versions", []):
        res = raw.get("resources", {}) or {}
        auto = raw.get("autoscaling", {}) or {}
        versions.append(ModelVersion(
            name=raw["name"], storage_uri=raw["storageUri"],
            runtime=raw.get("runtime", "triton-vllm"), image=raw.get("image", ""),
            tensor_parallel_size=int(raw.get("tensorParallelSize", 1)),
            max_model_len=int(raw.get("maxModelLen", 32768)),
            gpu_memory_utilization=float(raw.get("gpuMemoryUtilization", 0.9)),
            gpus=int(res.get("gpus", 1)), gpu_resource=res.get("gpuResource", "nvidia.com/gpu"),
            cpu=str(res.get("cpu", "8")), memory=str(res.get("memory", "64Gi")),
            shared_memory=str(res.get("sharedMemory", "16Gi")),
            node_selector=dict(raw.get("nodeSelector", {}) or {}),
            min_replicas=int(raw.get("minReplicas", 1)),
            max_replicas=int(raw.get("maxReplicas", 1)),
            autoscaling=Autoscaling(auto.get("signal", "concurrency"), int(auto.get("target", 8)),
                                    auto.get("prometheusAddress", "")),
            traffic_percent=raw.get("trafficPercent"), chat_template=raw.get("chatTemplate", ""),
            domains=_domains(raw.get("domains")),
            data_parallel_size=int(raw.get("dataParallelSize", 1)),
            expert_parallel=bool(raw.get("expertParallel", False)),
            reasoning_parser=str(raw.get("reasoningParser", "qwen3")),
            vllm_args=tuple(str(a) for a in raw.get("vllmArgs", ()) or ())))
    aliases = spec.get("aliases", {}) or {}
    template = spec.get("chatTemplate", {}) or {}
    ref = template.get("configMapRef")
    parsed = WorldModelSpec(
        name=spec.get("modelName") or name, versions=versions,
        stable=aliases.get("stable", ""), canary=aliases.get("canary", ""),
        canary_percent=int(aliases.get("canaryPercent", 10)),
        chat_template_source=template.get("source", "checkpoint"),
        chat_template_configmap=(ref["name"], ref.get("key", "chat_template.jinja")) if ref
        else None,
        chat_template_inline=template.get("inline", ""),
        drain_seconds=int(spec.get("drainSeconds", 3600)),
        domains=_domains(spec.get("domains")))
    check(parsed)
    return parsed


def check(spec: WorldModelSpec) -> None:
    names = [v.name for v in spec.versions]
    if not names:
        raise SpecError("a WorldModel needs at least one version")
    if len(set(names)) != len(names):
        raise SpecError(f"version names must be unique: {names}")
    for alias in (spec.stable, spec.canary):
        if alias and alias not in names:
            raise SpecError(f"alias points at unknown version {alias!r}")
    for v in spec.versions:
        if v.gpus and v.tensor_parallel_size > v.gpus:
            raise SpecError(f"version {v.name}: tensorParallelSize {v.tensor_parallel_size} needs "
                            f"at least that many GPUs (has {v.gpus})")
        if v.max_replicas < v.min_replicas:
            raise SpecError(f"version {v.name}: maxReplicas < minReplicas")
        if v.autoscaling.signal == "queue-depth" and not v.autoscaling.prometheus_address:
            raise SpecError(f"version {v.name}: queue-depth autoscaling needs prometheusAddress")
    if spec.chat_template_source == "configMap" and spec.chat_template_configmap is None:
        raise SpecError("chatTemplate.source=configMap needs configMapRef")
    if spec.chat_template_source == "inline" and not spec.chat_template_inline:
        raise SpecError("chatTemplate.source=inline needs inline")


def traffic_weights(spec: WorldModelSpec) -> dict[str, int]:
    """Share of new sessions per version (percent, summing to 100 when any version serves).

    Explicit ``trafficPercent`` values win; otherwise stable gets 100 - canaryPercent and the
    canary the rest; without aliases the first version takes everything.
    """
    explicit = {v.name: v.traffic_percent for v in spec.versions if v.traffic_percent is not None}
    if explicit:
        return {v.name: int(explicit.get(v.name, 0)) for v in spec.versions}
    weights = dict.fromkeys((v.name for v in spec.versions), 0)
    stable = spec.stable or spec.versions[0].name
    if spec.canary and spec.canary != stable:
        weights[spec.canary] = spec.canary_percent
        weights[stable] = 100 - spec.canary_percent
    else:
        weights[stable] = 100
    return weights


@dataclass(frozen=True, slots=True)
class TenantSpec:
    tenant_id: str
    display_name: str = ""
    default_model: str = ""
    quota: dict[str, Any] = field(default_factory=dict)


_QUOTA_KEYS = {"maxSessions": "max_sessions", "maxInflightSteps": "max_inflight_steps",
               "tokensPerMinute": "tokens_per_minute",
               "monthlyTokenBudget": "monthly_token_budget",
               "allowedModels": "allowed_models", "allowedDomains": "allowed_domains"}


def parse_tenant(name: str, spec: dict[str, Any]) -> TenantSpec:
    quota = {_QUOTA_KEYS[k]: v for k, v in (spec.get("quota") or {}).items() if k in _QUOTA_KEYS}
    return TenantSpec(spec.get("tenantId") or name, spec.get("displayName", ""),
                      spec.get("defaultModel", ""), quota)
