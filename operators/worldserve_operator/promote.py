"""Record an evaluation on a WorldModel and promote the version if it passes the gate."""

from __future__ import annotations

import json
from typing import Any, cast

from kubernetes import client

from worldserve_operator.gate import ANNOTATION, check, parse_gate
from worldserve_operator.specs import GROUP, VERSION


def promote(api: client.ApiClient, namespace: str, name: str, version: str,
            summary: dict[str, Any]) -> tuple[bool, str]:
    """Annotate the evaluation; when it passes, make ``version`` the stable alias (and drop it
    as canary). Returns (promoted, reason)."""
    custom = client.CustomObjectsApi(api)
    wm = cast(dict[str, Any], custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, "worldmodels", name))
    spec = dict(wm.get("spec", {}))
    if version not in [v["name"] for v in spec.get("versions", [])]:
        return False, f"{name} has no version {version}"
    ok, reason = check(parse_gate(spec), summary)
    patch: dict[str, Any] = {"metadata": {"annotations": {
        ANNOTATION + version: json.dumps(summary, sort_keys=True)}}}
    if ok:
        aliases: dict[str, Any] = {"stable": version}
        if (spec.get("aliases") or {}).get("canary") == version:
            aliases["canary"] = None  # merge patch: remove the key
        patch["spec"] = {"aliases": aliases}
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "worldmodels", name, patch)
    return ok, reason
