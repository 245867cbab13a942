"""The promotion gate: pure rules, `promote` against kmock, the operator holding stable back."""

from __future__ import annotations

import asyncio
import copy
import json

from kubernetes import client

from tests.operator.test_reconcile import body_of
from worldserve_operator.gate import ANNOTATION, Gate, check, effective_stable
from worldserve_operator.promote import promote

GATE = Gate("token_f1", 0.6)
PASSING = {"n": 40, "token_f1": 0.62, "exact_match": 0.4}
FAILING = {"n": 40, "token_f1": 0.55}


def test_gate_rules() -> None:
    assert check(None, None) == (True, "no evaluation gate")
    assert check(GATE, None) == (False, "no evaluation recorded")
    assert check(GATE, {"exact_match": 1.0})[0] is False
    assert check(GATE, FAILING) == (False, "token_f1 0.550 < 0.6")
    assert check(GATE, PASSING)[0] is True
    note = {ANNOTATION + "v2": json.dumps(FAILING)}
    assert effective_stable("v2", "v1", GATE, note) == (
        "v1", "promotion of v2 blocked: token_f1 0.550 < 0.6")
    assert effective_stable("v2", "v1", GATE, {ANNOTATION + "v2": json.dumps(PASSING)}) == \
        ("v2", "")
    assert effective_stable("v2", "", GATE, {}) == ("v2", "")  # first reconcile: as declared
    assert effective_stable("v2", "v1", None, {}) == ("v2", "")  # no gate configured


async def test_operator_holds_stable_back_until_the_gate_passes(world) -> None:  # type: ignore[no-untyped-def]
    _, rec, registry, _, _ = world
    body = body_of("qwen-agentworld-397b-a17b-triton")
    body["spec"]["evaluation"] = {"metric": "token_f1", "minScore": 0.6}
    status = await asyncio.to_thread(rec.reconcile, body)
    assert status["stable"] == "v1" and status["promotion"] == "ok"
    promoted = copy.deepcopy(body)
    promoted["status"] = status
    promoted["spec"]["aliases"] = {"stable": "v2"}
    status = await asyncio.to_thread(rec.reconcile, promoted)
    assert status["stable"] == "v1" and "blocked" in status["promotion"]
    aliases = registry.r.hgetall(registry.aliases_key)
    assert aliases[b"qwen-agentworld-397b-a17b:stable"] == b"qwen-agentworld-397b-a17b@v1"
    weights = {k: e["weight"] for k, e in registry.entries("qwen-agentworld-397b-a17b").items()}
    assert weights["qwen-agentworld-397b-a17b@v1"] == 100
    promoted["metadata"]["annotations"] = {ANNOTATION + "v2": json.dumps(PASSING)}
    status = await asyncio.to_thread(rec.reconcile, promoted)
    assert status["stable"] == "v2" and status["promotion"] == "ok"
    assert registry.r.hget(registry.aliases_key, "qwen-agentworld-397b-a17b:stable") == \
        b"qwen-agentworld-397b-a17b@v2"


async def test_promote_records_and_moves_the_alias(world) -> None:  # type: ignore[no-untyped-def]
    kmock, _, _, _, api = world
    verbs = ["get", "list", "watch", "patch", "create", "delete"]
    kmock.resources["worldserve.io/v1alpha1/worldmodels"] = {
        "kind": "WorldModel", "namespaced": True, "singular": "worldmodel", "verbs": verbs}
    body = body_of("qwen-agentworld-397b-a17b-triton")
    body["spec"]["evaluation"] = {"metric": "token_f1", "minScore": 0.6}
    body["metadata"]["annotations"] = {}
    kmock.objects["worldserve.io/v1alpha1/worldmodels", "models", body["metadata"]["name"]] = body
    name = body["metadata"]["name"]

    def current() -> dict:  # type: ignore[type-arg]
        return client.CustomObjectsApi(api).get_namespaced_custom_object(
            "worldserve.io", "v1alpha1", "models", "worldmodels", name)

    ok, reason = await asyncio.to_thread(promote, api, "models", name, "v2", FAILING)
    assert not ok and "0.550 < 0.6" in reason
    wm = await asyncio.to_thread(current)
    assert wm["spec"]["aliases"]["stable"] == "v1"
    assert json.loads(wm["metadata"]["annotations"][ANNOTATION + "v2"]) == FAILING
    ok, _ = await asyncio.to_thread(promote, api, "models", name, "v2", PASSING)
    wm = await asyncio.to_thread(current)
    assert ok and wm["spec"]["aliases"]["stable"] == "v2"
    assert "canary" not in wm["spec"]["aliases"] or wm["spec"]["aliases"]["canary"] is None
    ok, reason = await asyncio.to_thread(promote, api, "models", name, "v9", PASSING)
    assert not ok and "no version v9" in reason
