"""Validation of Kubernetes objects: core kinds via kubernetes-validate, KServe and worldserve
kinds via their CRDs' openAPIV3Schema (jsonschema)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "schemas" / "kserve"
CRDS = ROOT / "helm" / "worldserve" / "crds"
K8S_VERSION = "1.30.0"


def _crd_schemas(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
        for version in doc["spec"]["versions"]:
            out[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return out


@cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for path in [*SHARED.glob("*.yaml"), *CRDS.glob("*.yaml")]:
        schemas.update(_crd_schemas(path))
    return schemas


def _strip_k8s_extensions(schema: Any) -> Any:
    """jsonschema does not know x-kubernetes-int-or-string: let such fields be int or string."""
    if isinstance(schema, dict):
        out = {k: _strip_k8s_extensions(v) for k, v in schema.items()}
        if out.get("x-kubernetes-int-or-string"):
            out.pop("type", None)
            out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
        return out
    if isinstance(schema, list):
        return [_strip_k8s_extensions(v) for v in schema]
    return schema


def validate(obj: dict[str, Any]) -> None:
    """Raise if the object does not match its kind's schema (unknown kinds raise too)."""
    key = (obj["apiVersion"], obj["kind"])
    schema = crd_schemas().get(key)
    if schema is not None:
        jsonschema.validate(obj, _strip_k8s_extensions(schema))
        return
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
