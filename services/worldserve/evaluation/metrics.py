"""Rule metrics of a predicted observation against the real one (pure)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

__all__ = ["exact_match", "json_structure", "rouge_l", "token_f1"]


def exact_match(predicted: str, reference: str) -> float:
    return float(predicted.strip() == reference.strip())


def rouge_l(predicted: str, reference: str) -> float:
    """ROUGE-L F1 over whitespace tokens (longest common subsequence)."""
    p, r = predicted.split(), reference.split()
    if not p and not r:
        return 1.0
    if not p or not r:
        return 0.0
    prev = [0] * (len(r) + 1)
    for a in p:
        cur = [0]
        for j, b in enumerate(r, start=1):
            cur.append(prev[j - 1] + 1 if a == b else max(prev[j], cur[j - 1]))
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(r)
    return 2 * precision * recall / (precision + recall)


def _paths(value: Any, prefix: str = "$") -> Iterable[str]:
    """Key paths with the type of what sits there: the *shape* of a JSON value."""
    if isinstance(value, dict):
        yield f"{prefix}:object"
        for key, item in value.items():
            yield from _paths(item, f"{prefix}.{key}")
    elif isinstance(value, list):
        yield f"{prefix}:array"
        for item in value[:50]:
            yield from _paths(item, f"{prefix}[]")
    else:
        yield f"{prefix}:{type(value).__name__}"


def json_structure(predicted: str, reference: str) -> float | None:
    """Jaccard similarity of the key-path/type sets of two JSON observations (MCP results).

    None when the reference is not JSON (the metric does not apply); 0 when only the
    prediction fails to parse.
    """
    try:
        ref = json.loads(reference)
    except ValueError:
        return None
    try:
        pred = json.loads(predicted)
    except ValueError:
        return 0.0
    a, b = set(_paths(pred)), set(_paths(ref))
    return len(a & b) / len(a | b) if a | b else 1.0


# What a failure of each kind looks like in an observation (lower case).
FAILURE_SIGNS = {"timeout": ("timeout", "timed out"),
                 "permission_denied": ("permission denied", "forbidden"),
                 "network_unreachable": ("could not resolve", "unreachable", "connection failed",
                                         "connection refused"),
                 "http_429": ("429", "too many requests"),
                 "http_500": ("500", "internal server error")}


def fault_visible(kind: str, predicted: str, reference: str, untruncated: str = "") -> bool:
    """Does ``predicted`` show the injected failure ``kind``? (``reference`` is the real failing
    output; ``untruncated`` the real output before a truncation cut it.)"""
    p = predicted.lower()
    if kind in FAILURE_SIGNS:
        return any(s in p for s in FAILURE_SIGNS[kind])
    if kind == "malformed_json":
        try:
            json.loads(predicted)
        except ValueError:
            return bool(predicted.strip())
        return False
    if kind == "truncated_output":
        full, cut = untruncated.strip(), predicted.strip()  # leading padding on both sides
        return bool(cut) and cut != full and full.startswith(cut)
    return predicted.strip() == reference.strip()  # stale_data: the old answer itself


def false_failure(predicted: str, reference: str) -> bool:
    """On a turn with no injected fault: does ``predicted`` show a failure (a timeout, a denied
    permission, an unreachable host, an HTTP 429/500) that the real output does not? The
    counterpart of ``fault_visible``: a model that always fails would show every fault."""
    p, r = predicted.lower(), reference.lower()
    return any(s in p and s not in r for signs in FAILURE_SIGNS.values() for s in signs
               if not s.isdigit())


JSON_DOMAINS = frozenset({"MCP"})  # whose observations are JSON objects


def score(predicted: str, reference: str, format_valid: bool, fault: str = "",
          untruncated: str = "", domain: str = "MCP") -> dict[str, float | None]:
    return {"format_valid": float(format_valid), "exact_match": exact_match(predicted, reference),
            "token_f1": token_f1(predicted, reference), "rouge_l": rouge_l(predicted, reference),
            "json_structure": (json_structure(predicted, reference)
                               if domain in JSON_DOMAINS else None),
            "fault_visible": (float(format_valid and fault_visible(fault, predicted, reference,
                                                                   untruncated))
                              if fault else None)}


def token_f1(predicted: str, reference: str) -> float:
    """Bag-of-whitespace-tokens F1; two empty strings agree fully."""
    p, r = predicted.split(), reference.split()
    if not p and not r:
        return 1.0
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)
