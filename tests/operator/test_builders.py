"""The operator's pure builders, checked as dicts and against the KServe CRD schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.k8s_schemas import ROOT, crd_schemas, validate
from worldserve.domains.modelcard import ALL_DOMAINS
from worldserve.routing.choice import Entry
from worldserve_operator import builders
from worldserve_operator.specs import SpecError, parse_tenant, parse_worldmodel, traffic_weights

EXAMPLES = sorted((ROOT / "examples").rglob("*.yaml"))
OWNER = {"metadata": {"name": "wm", "uid": "1234"}}


def load(path: Path) -> dict[str, Any]:
    return dict(yaml.safe_load(path.read_text()))


def example(name: str) -> dict[str, Any]:
    return load(ROOT / "examples" / "worldmodels" / f"{name}.yaml")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_match_their_crd(path: Path) -> None:
    validate(load(path))


def test_crds_are_valid_kubernetes_objects() -> None:
    for path in (ROOT / "helm" / "worldserve" / "crds").glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            validate(doc)
    assert ("worldserve.io/v1alpha1", "WorldModel") in crd_schemas()


def test_crd_schema_rejects_bad_specs() -> None:
    schema = crd_schemas()[("worldserve.io/v1alpha1", "WorldModel")]
    bad = example("qwen-agentworld-35b-a3b-triton")
    bad["spec"]["versions"][0]["runtime"] = "onnx"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    bad = example("qwen-agentworld-35b-a3b-triton")
    bad["spec"]["versions"][0]["storageUri"] = "ftp://x"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_triton_vllm_version_builds_isvc_and_model_repository() -> None:
    body = example("qwen-agentworld-397b-a17b-triton")
    spec = parse_worldmodel("qwen-agentworld-397b-a17b", body["spec"])
    v1 = spec.versions[0]
    isvc = builders.inference_service(spec, v1, "models", OWNER)
    validate(isvc)
    predictor = isvc["spec"]["predictor"]
    assert isvc["metadata"]["name"] == "qwen-agentworld-397b-a17b-v1"
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    assert isvc["metadata"]["ownerReferences"][0]["uid"] == "1234"
    assert predictor["model"]["runtime"] == "worldserve-triton-vllm"
    assert predictor["model"]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert predictor["model"]["storageUri"] == "hf://Qwen/Qwen-AgentWorld-397B-A17B"
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (1, 4)
    external = predictor["autoScaling"]["metrics"][0]["external"]
    assert "nv_inference_pending_request_count" in external["metric"]["query"]
    assert predictor["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    repo = builders.model_repository(spec, v1, "models", OWNER)
    validate(repo)
    engine = json.loads(repo["data"]["model.json"])
    assert engine["tensor_parallel_size"] == 8 and engine["enable_prefix_caching"] is True
    assert engine["model"] == "/mnt/models" and engine["max_model_len"] == 32768
    assert 'backend: "vllm"' in repo["data"]["config.pbtxt"]
    assert "decoupled: true" in repo["data"]["config.pbtxt"]
    mounted = {v["name"]: v for v in predictor["volumes"]}
    assert mounted["model-repo"]["configMap"]["name"] == repo["metadata"]["name"]


def test_worldserve_runtime_and_concurrency_autoscaling() -> None:
    spec = parse_worldmodel("tiny", {"versions": [
        {"name": "v1", "storageUri": "pvc://models/tiny", "runtime": "worldserve",
         "resources": {"gpus": 0, "cpu": "2", "memory": "4Gi"},
         "autoscaling": {"signal": "concurrency", "target": 4}, "maxReplicas": 3}]})
    isvc = builders.inference_service(spec, spec.versions[0], "default", OWNER)
    validate(isvc)
    predictor = isvc["spec"]["predictor"]
    assert predictor["scaleMetric"] == "concurrency" and predictor["scaleTarget"] == 4
    assert predictor["model"]["runtime"] == "worldserve-pytriton"
    env = {e["name"]: e["value"] for e in predictor["model"]["env"]}
    assert env["WORLDSERVE_ENGINE"] == "transformers" and env["WORLDSERVE_MODEL_DIR"] == "/mnt/models"
    assert "nvidia.com/gpu" not in predictor["model"]["resources"]["limits"]


def test_traffic_weights_and_aliases() -> None:
    spec = parse_worldmodel("m", example("qwen-agentworld-397b-a17b-triton")["spec"])
    assert traffic_weights(spec) == {"v1": 90, "v2": 10}
    assert builders.aliases(spec) == {"m:stable": "m@v1", "m:canary": "m@v2"}
    entries = builders.registry_entries(spec, "models", "TEMPLATE", traffic_weights(spec))
    assert entries["m@v2"]["weight"] == 10 and entries["m@v1"]["chat_template"] == "TEMPLATE"
    assert entries["m@v1"]["endpoint"].startswith("m-v1-predictor.models.svc")
    one = parse_worldmodel("m", {"versions": [{"name": "a", "storageUri": "s3://x"},
                                             {"name": "b", "storageUri": "s3://y",
                                              "trafficPercent": 30}]})
    assert traffic_weights(one) == {"a": 0, "b": 30}


def test_declared_domains_reach_the_registry_entry() -> None:
    spec = parse_worldmodel("m", example("qwen-agentworld-397b-a17b-triton")["spec"])
    entries = builders.registry_entries(spec, "models", "", traffic_weights(spec))
    assert entries["m@v1"]["domains"] == ["MCP", "SEARCH", "TERMINAL", "SWE", "WEB", "OS",
                                          "ANDROID"]
    tiny = parse_worldmodel("t", {"domains": ["terminal", "MCP"], "versions": [
        {"name": "a", "storageUri": "s3://x"},
        {"name": "b", "storageUri": "s3://y", "domains": ["TERMINAL"]}]})
    entries = builders.registry_entries(tiny, "ns", "", {"a": 100})
    assert entries["t@a"]["domains"] == ["TERMINAL", "MCP"]
    assert entries["t@b"]["domains"] == ["TERMINAL"]
    bare = parse_worldmodel("u", {"versions": [{"name": "a", "storageUri": "s3://x"}]})
    raw = builders.registry_entries(bare, "ns", "", {"a": 100})["u@a"]
    assert raw["domains"] == list(ALL_DOMAINS)  # none declared: all


def test_the_registry_entry_is_one_contract_both_sides_read() -> None:
    """What the operator writes parses back into the gateway's Entry unchanged, field by field."""
    spec = parse_worldmodel("m", example("qwen-agentworld-397b-a17b-triton")["spec"])
    for label, raw in builders.registry_entries(spec, "models", "T",
                                                traffic_weights(spec)).items():
        entry = Entry.from_dict(label, raw)
        assert entry.to_dict() == raw
        assert entry.endpoint == raw["endpoint"] and entry.runtime == raw["runtime"]
        assert set(raw) <= {f for f in Entry.__dataclass_fields__ if f != "label"} | {
            "endpoints"}


@pytest.mark.parametrize("spec, problem", [
    ({"versions": []}, "at least one"),
    ({"versions": [{"name": "a", "storageUri": "s3://x"}] * 2}, "unique"),
    ({"versions": [{"name": "a", "storageUri": "s3://x"}], "aliases": {"stable": "b"}},
     "unknown version"),
    ({"versions": [{"name": "a", "storageUri": "s3://x", "tensorParallelSize": 4,
                    "resources": {"gpus": 2}}]}, "tensorParallelSize"),
    ({"versions": [{"name": "a", "storageUri": "s3://x", "autoscaling": {"signal": "queue-depth"}}]},
     "prometheusAddress"),
    ({"versions": [{"name": "a", "storageUri": "s3://x"}], "domains": ["CHESS"]}, "unknown domain"),
])
def test_specs_the_schema_cannot_reject(spec: dict[str, Any], problem: str) -> None:
    with pytest.raises(SpecError, match=problem):
        parse_worldmodel("m", spec)


def test_tenant_spec() -> None:
    t = parse_tenant("acme", load(ROOT / "examples" / "tenants" / "acme.yaml")["spec"])
    assert t.tenant_id == "acme" and t.quota["monthly_token_budget"] == 500_000_000
    assert t.quota["allowed_domains"] == ["WEB", "OS", "ANDROID"]


VLLM_SPEC = {"domains": ["MCP", "TERMINAL"], "versions": [{
    "name": "v1", "storageUri": "hf://Qwen/Qwen-AgentWorld-35B-A3B", "runtime": "vllm",
    "tensorParallelSize": 4, "dataParallelSize": 2, "expertParallel": True,
    "maxModelLen": 262144, "minReplicas": 2, "maxReplicas": 4, "resources": {"gpus": 4},
    "vllmArgs": ["--max-num-seqs", "64"]}]}


def test_vllm_version_builds_a_valid_llm_inference_service() -> None:
    spec = parse_worldmodel("agentworld", VLLM_SPEC)
    v = spec.versions[0]
    obj = builders.llm_inference_service(spec, v, "models", OWNER)
    validate(obj)  # against shared/schemas/kserve/serving.kserve.io_llminferenceservices.yaml
    assert (obj["apiVersion"], obj["kind"]) == ("serving.kserve.io/v1alpha2",
                                                "LLMInferenceService")
    body = obj["spec"]
    assert body["model"] == {"uri": "hf://Qwen/Qwen-AgentWorld-35B-A3B",
                             "name": "agentworld@v1"}
    assert body["replicas"] == 2
    assert body["parallelism"] == {"tensor": 4, "data": 2, "expert": True}
    args = body["template"]["containers"][0]["args"]
    for flag in ("--language-model-only", "--enable-prefix-caching", "--trust-remote-code"):
        assert flag in args
    assert args[args.index("--reasoning-parser") + 1] == "qwen3"
    assert args[args.index("--max-model-len") + 1] == "262144"
    assert args[-2:] == ["--max-num-seqs", "64"]
    limits = body["template"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "4"
    assert set(body["router"]) == {"route", "gateway", "scheduler"}
    assert "worldserve.io/model" in body["labels"]  # the NetworkPolicy selects the pods


def test_vllm_version_registers_as_openai() -> None:
    spec = parse_worldmodel("agentworld", VLLM_SPEC)
    raw = builders.registry_entries(spec, "models", "", {"v1": 100})["agentworld@v1"]
    entry = Entry.from_dict("agentworld@v1", raw)
    assert entry.protocol == "openai" and entry.runtime == "vllm"
    assert entry.endpoint.startswith("http://agentworld-v1-kserve-workload-svc.models.svc")
    moved = builders.registry_entries(spec, "models", "", {"v1": 100},
                                      {"v1": "https://agentworld.example/"})["agentworld@v1"]
    assert moved["endpoint"] == "https://agentworld.example/"  # the service's own address
    triton = parse_worldmodel("m", example("qwen-agentworld-397b-a17b-triton")["spec"])
    raw = builders.registry_entries(triton, "models", "", {"v1": 100})["m@v1"]
    assert Entry.from_dict("m@v1", raw).protocol == "triton" and "protocol" not in raw


@pytest.mark.parametrize("name", ["qwen-agentworld-35b-a3b", "qwen-agentworld-397b-a17b"])
def test_the_big_examples_default_to_the_llm_track(name: str) -> None:
    spec = parse_worldmodel(name, example(name)["spec"])
    for v in spec.versions:
        assert v.runtime == "vllm"
        obj = builders.llm_inference_service(spec, v, "models", OWNER)
        validate(obj)
        args = obj["spec"]["template"]["containers"][0]["args"]
        assert args[args.index("--reasoning-parser") + 1] == "qwen3"
        assert "--language-model-only" in args
    entries = builders.registry_entries(spec, "models", "", {v.name: 100 for v in spec.versions})
    assert {Entry.from_dict(k, e).protocol for k, e in entries.items()} == {"openai"}
    # the gateway learns each version's context from its entry
    assert {Entry.from_dict(k, e).max_model_len for k, e in entries.items()} == {
        v.max_model_len for v in spec.versions}
