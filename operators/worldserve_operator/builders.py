"""Kubernetes objects and registry entries built from a WorldModel (pure: dicts in, dicts out).

Checked as dicts in tests and validated against the KServe CRD schemas.
"""

from __future__ import annotations

import json
import re
from typing import Any

from worldserve.domains.modelcard import normalize_domains
from worldserve.routing.choice import Entry
from worldserve_operator.specs import GROUP, VERSION, ModelVersion, WorldModelSpec

KSERVE_API = "serving.kserve.io/v1beta1"
LLM_API = "serving.kserve.io/v1alpha2"  # KServe's LLM track (llm-d): LLMInferenceService
VLLM_PORT = 8000
MANAGED_BY = {"app.kubernetes.io/managed-by": "worldserve-operator"}
RUNTIMES = {"triton-vllm": ("worldserve-triton-vllm", "triton"),
            "worldserve": ("worldserve-pytriton", "worldserve")}
MODEL_REPO_MOUNT = "/mnt/model-repo"
TRITON_MODEL = "worldmodel"  # the model name the gateway calls (WORLDSERVE_MODEL_NAME)


def resource_name(model: str, version: str) -> str:
    """DNS-1035 name of a version's InferenceService (KServe appends -predictor-…)."""
    base = re.sub(r"[^a-z0-9-]", "-", f"{model}-{version}".lower()).strip("-")
    return base[:45].rstrip("-")


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "WorldModel", "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def _labels(spec: WorldModelSpec, v: ModelVersion) -> dict[str, str]:
    return {**MANAGED_BY, "worldserve.io/model": spec.name[:63], "worldserve.io/version": v.name}


def model_repository(spec: WorldModelSpec, v: ModelVersion, namespace: str,
                     owner: dict[str, Any]) -> dict[str, Any]:
    """ConfigMap holding the Triton vLLM-backend model repository of one version."""
    config = (f'name: "{TRITON_MODEL}"\nbackend: "vllm"\nmax_batch_size: 0\n'
              "model_transaction_policy {\n  decoupled: true\n}\n"
              "instance_group [\n  {\n    count: 1\n    kind: KIND_MODEL\n  }\n]\n")
    engine = {"model": "/mnt/models", "tensor_parallel_size": v.tensor_parallel_size,
              "max_model_len": v.max_model_len,
              "gpu_memory_utilization": v.gpu_memory_utilization,
              "enable_prefix_caching": True, "disable_log_stats": False,
              "served_model_name": f"{spec.name}@{v.name}"}
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"{resource_name(spec.name, v.name)}-repo", "namespace": namespace,
                     "labels": _labels(spec, v), "ownerReferences": [owner_reference(owner)]},
        "data": {"config.pbtxt": config, "model.json": json.dumps(engine, indent=2)},
    }


def _autoscaling(v: ModelVersion, name: str, namespace: str) -> dict[str, Any]:
    auto = v.autoscaling
    if auto.signal in ("concurrency", "rps"):
        return {"scaleMetric": auto.signal, "scaleTarget": auto.target}
    query = (f'sum(nv_inference_pending_request_count{{namespace="{namespace}",'
             f'pod=~"{name}-predictor-.*"}})')
    return {"autoScaling": {"metrics": [{"type": "External", "external": {
        "metric": {"backend": "prometheus", "serverAddress": auto.prometheus_address,
                   "query": query},
        "target": {"type": "Value", "value": str(auto.target)}}}]}}


def inference_service(spec: WorldModelSpec, v: ModelVersion, namespace: str,
                      owner: dict[str, Any]) -> dict[str, Any]:
    name = resource_name(spec.name, v.name)
    runtime, fmt = RUNTIMES[v.runtime]
    limits: dict[str, Any] = {"cpu": v.cpu, "memory": v.memory}
    if v.gpus:
        limits[v.gpu_resource] = str(v.gpus)
    model: dict[str, Any] = {
        "modelFormat": {"name": fmt}, "runtime": runtime, "storageUri": v.storage_uri,
        "resources": {"limits": limits, "requests": dict(limits)},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": v.shared_memory}}]
    if v.runtime == "triton-vllm":
        model["volumeMounts"].append({"name": "model-repo", "mountPath": MODEL_REPO_MOUNT,
                                      "readOnly": True})
        volumes.append({"name": "model-repo", "configMap": {
            "name": f"{name}-repo",
            "items": [{"key": "config.pbtxt", "path": f"{TRITON_MODEL}/config.pbtxt"},
                      {"key": "model.json", "path": f"{TRITON_MODEL}/1/model.json"}]}})
    else:
        model["env"] = [
            {"name": "WORLDSERVE_MODEL_DIR", "value": "/mnt/models"},
            {"name": "WORLDSERVE_ENGINE", "value": "vllm" if v.gpus else "transformers"},
            {"name": "WORLDSERVE_MODEL_VERSION_LABEL", "value": f"{spec.name}@{v.name}"}]
    if v.image:
        model["image"] = v.image
    # The pods carry the version's labels too: the chart's NetworkPolicy admits only gateways
    # to pods labelled worldserve.io/model.
    predictor: dict[str, Any] = {"minReplicas": v.min_replicas, "maxReplicas": v.max_replicas,
                                 "model": model, "volumes": volumes, "labels": _labels(spec, v),
                                 **_autoscaling(v, name, namespace)}
    if v.node_selector:
        predictor["nodeSelector"] = dict(v.node_selector)
    return {
        "apiVersion": KSERVE_API, "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(spec, v),
                     "annotations": {"serving.kserve.io/deploymentMode": "Standard"},
                     "ownerReferences": [owner_reference(owner)]},
        "spec": {"predictor": predictor},
    }


def llm_inference_service(spec: WorldModelSpec, v: ModelVersion, namespace: str,
                          owner: dict[str, Any]) -> dict[str, Any]:
    """A KServe LLMInferenceService (v1alpha2, llm-d) serving one version with vLLM: its
    OpenAI-compatible /v1/completions is what the gateway calls (registry protocol openai)."""
    limits: dict[str, Any] = {"cpu": v.cpu, "memory": v.memory}
    if v.gpus:
        limits[v.gpu_resource] = str(v.gpus)
    args = ["--served-model-name", f"{spec.name}@{v.name}", "--max-model-len",
            str(v.max_model_len), "--gpu-memory-utilization", str(v.gpu_memory_utilization),
            "--enable-prefix-caching", "--language-model-only", "--trust-remote-code"]
    if v.reasoning_parser:
        args += ["--reasoning-parser", v.reasoning_parser]
    args += list(v.vllm_args)
    container: dict[str, Any] = {"name": "main", "args": args,
                                 "resources": {"limits": limits, "requests": dict(limits)}}
    if v.image:
        container["image"] = v.image
    template: dict[str, Any] = {"containers": [container]}
    if v.node_selector:
        template["nodeSelector"] = dict(v.node_selector)
    parallelism: dict[str, Any] = {"tensor": v.tensor_parallel_size}
    if v.data_parallel_size > 1:
        parallelism["data"] = v.data_parallel_size
    if v.expert_parallel:
        parallelism["expert"] = True
    return {
        "apiVersion": LLM_API, "kind": "LLMInferenceService",
        "metadata": {"name": resource_name(spec.name, v.name), "namespace": namespace,
                     "labels": _labels(spec, v), "annotations": {},
                     "ownerReferences": [owner_reference(owner)]},
        "spec": {
            "model": {"uri": v.storage_uri, "name": f"{spec.name}@{v.name}"},
            "replicas": v.min_replicas, "parallelism": parallelism,
            "labels": _labels(spec, v),  # on the pods: the chart's NetworkPolicy selects them
            "template": template,
            "router": {"route": {}, "gateway": {}, "scheduler": {}},  # llm-d routing on
        },
    }


def endpoint(spec: WorldModelSpec, v: ModelVersion, namespace: str) -> str:
    """Where the gateway reaches a version: the predictor Service's gRPC (h2c) port, or for
    vllm the LLMInferenceService's workload Service (its status address wins when known)."""
    name = resource_name(spec.name, v.name)
    if v.runtime == "vllm":
        return f"http://{name}-kserve-workload-svc.{namespace}.svc.cluster.local:{VLLM_PORT}"
    return f"{name}-predictor.{namespace}.svc.cluster.local:80"


def protocol(v: ModelVersion) -> str:
    return "openai" if v.runtime == "vllm" else "triton"


def registry_entries(spec: WorldModelSpec, namespace: str, chat_template: str,
                     weights: dict[str, int], addresses: dict[str, str] | None = None
                     ) -> dict[str, dict[str, Any]]:
    """``name@version`` → what the gateway needs to route new and pinned sessions.

    An empty ``chat_template`` means "the checkpoint's own" (the gateway reads it from the
    model server's files)."""
    out = {}
    for v in spec.versions:
        label = f"{spec.name}@{v.name}"
        address = (addresses or {}).get(v.name) or endpoint(spec, v, namespace)
        out[label] = Entry(
            label, spec.name, v.name, address, TRITON_MODEL,
            weights.get(v.name, 0), "serving", v.chat_template or chat_template,
            domains=normalize_domains(list(spec.domains_of(v))), runtime=v.runtime,
            protocol=protocol(v),
            # vLLM is told max_model_len; the worldserve runtime uses the checkpoint's own
            max_model_len=0 if v.runtime == "worldserve" else v.max_model_len).to_dict()
    return out


def aliases(spec: WorldModelSpec) -> dict[str, str]:
    out = {}
    if spec.stable:
        out[f"{spec.name}:stable"] = f"{spec.name}@{spec.stable}"
    if spec.canary:
        out[f"{spec.name}:canary"] = f"{spec.name}@{spec.canary}"
    return out
