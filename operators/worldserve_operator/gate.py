"""The promotion gate (pure): a version becomes ``stable`` only with a passing evaluation.

`worldserve promote` records a version's evaluation summary on the WorldModel as the annotation
``worldserve.io/eval.<version>`` (the overall row of `worldserve eval`'s summary.json) and, when
it passes, moves ``aliases.stable``. The operator enforces the same rule: if ``stable`` is edited
to a version without a passing evaluation, the registry keeps routing new sessions to the
previous stable version and the status says why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ANNOTATION = "worldserve.io/eval."


@dataclass(frozen=True, slots=True)
class Gate:
    metric: str
    min_score: float
    dataset: str = ""


def parse_gate(spec: dict[str, Any]) -> Gate | None:
    raw = spec.get("evaluation")
    if not raw:
        return None
    return Gate(str(raw["metric"]), float(raw["minScore"]), str(raw.get("dataset", "")))


def recorded(annotations: dict[str, str], version: str) -> dict[str, Any] | None:
    raw = annotations.get(ANNOTATION + version)
    if raw is None:
        return None
    try:
        return dict(json.loads(raw))
    except ValueError:
        return None


def check(gate: Gate | None, summary: dict[str, Any] | None) -> tuple[bool, str]:
    """(passes, reason) of an overall evaluation summary against the gate."""
    if gate is None:
        return True, "no evaluation gate"
    if summary is None:
        return False, "no evaluation recorded"
    value = summary.get(gate.metric)
    if value is None:
        return False, f"the evaluation has no {gate.metric}"
    if float(value) < gate.min_score:
        return False, f"{gate.metric} {float(value):.3f} < {gate.min_score}"
    return True, f"{gate.metric} {float(value):.3f} >= {gate.min_score}"


def effective_stable(requested: str, previous: str, gate: Gate | None,
                     annotations: dict[str, str]) -> tuple[str, str]:
    """The stable version to route to, and why (empty reason when the request is honoured)."""
    if not requested or not previous or requested == previous or gate is None:
        return requested, ""
    ok, reason = check(gate, recorded(annotations, requested))
    if ok:
        return requested, ""
    return previous, f"promotion of {requested} blocked: {reason}"
