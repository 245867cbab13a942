"""Fault injection (pure): which turn fails, how, and the instruction that makes the model say so.

A session's policy names fault kinds (or none = every kind its domain supports), a per-turn rate
and/or an explicit turn schedule, and its own seed. The decision for turn *n* depends only on
(policy, domain, n, seed), so a replay or a fork sees the same faults on the same turns. The fault
is realised by the world model itself: a control instruction in the system prompt of that turn
asks it to predict the failing environment's answer. The turn (and its usage event, and every
export) is labelled with the kind.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from worldserve.domains.templates import Domain

KINDS: dict[str, str] = {
    "timeout": "the operation hangs and then fails with the timeout error this environment "
               "prints",
    "http_500": "the server answers HTTP 500 Internal Server Error",
    "http_429": "the server answers HTTP 429 Too Many Requests (rate limited), with a "
                "Retry-After hint",
    "permission_denied": "the operation is refused: permission denied / forbidden",
    "malformed_json": "the response body is malformed JSON (cut off or with a syntax error)",
    "truncated_output": "the output stops abruptly partway through",
    "stale_data": "the data returned is stale: an older version of what the previous turns "
                  "established",
    "network_unreachable": "the network is unreachable (the host cannot be resolved or "
                           "connected to)",
}

DOMAIN_KINDS: dict[Domain, tuple[str, ...]] = {
    Domain.MCP: ("timeout", "http_500", "http_429", "permission_denied", "malformed_json",
                 "stale_data", "network_unreachable"),
    Domain.SEARCH: ("timeout", "http_500", "http_429", "truncated_output", "stale_data",
                    "network_unreachable"),
    # What the default model was trained on, each from real failing executions
    # (worldserve.training.shell): a shell has no "stale" answer to provoke.
    Domain.TERMINAL: ("timeout", "permission_denied", "truncated_output", "network_unreachable"),
    Domain.SWE: ("timeout", "permission_denied", "truncated_output", "network_unreachable"),
    Domain.WEB: ("timeout", "http_500", "http_429", "permission_denied", "truncated_output",
                 "stale_data", "network_unreachable"),
    Domain.OS: ("timeout", "permission_denied", "truncated_output", "stale_data"),
    Domain.ANDROID: ("timeout", "permission_denied", "truncated_output", "stale_data",
                     "network_unreachable"),
}

MAX_SCHEDULED_TURNS = 1024


def normalize_policy(domain: str, faults: dict[str, Any] | None) -> dict[str, Any]:
    """A checked policy (``{}`` when it injects nothing); ValueError says what is wrong."""
    faults = faults or {}
    kinds = [str(k) for k in faults.get("kinds", [])]
    rate = float(faults.get("rate", 0.0) or 0.0)
    turns = sorted({int(t) for t in faults.get("turns", [])})
    if not kinds and not rate and not turns:
        return {}
    supported = DOMAIN_KINDS[Domain(domain)]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown fault kind(s) {unknown}; known: {sorted(KINDS)}")
    unsupported = [k for k in kinds if k not in supported]
    if unsupported:
        raise ValueError(f"fault kind(s) {unsupported} do not apply to {domain}; it supports "
                         f"{list(supported)}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError("faults.rate must be within [0, 1]")
    if any(t < 1 for t in turns) or len(turns) > MAX_SCHEDULED_TURNS:
        raise ValueError(f"faults.turns are 1-based turn numbers (at most {MAX_SCHEDULED_TURNS})")
    policy: dict[str, Any] = {"kinds": kinds, "rate": rate, "turns": turns}
    if faults.get("seed") is not None:
        policy["seed"] = int(faults["seed"])
    return policy


def fault_for(policy: dict[str, Any], domain: str, turn_number: int, session_seed: str) -> str:
    """The fault kind of turn ``turn_number`` (1-based), or "" for none.

    ``session_seed`` (e.g. the root session id) stands in when the policy has no seed.
    """
    if not policy:
        return ""
    seed = policy.get("seed", session_seed)
    digest = hashlib.sha256(f"{seed}:{turn_number}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    hit = rng.random() < policy.get("rate", 0.0)
    if turn_number not in policy.get("turns", []) and not hit:
        return ""
    kinds = policy.get("kinds") or list(DOMAIN_KINDS[Domain(domain)])
    return str(rng.choice(kinds))


def instruction_tag(kind: str) -> str:
    """How the control instruction for ``kind`` begins (decoding finds it in a prompt)."""
    return f"[Fault injection: {kind}]"


def control_instruction(kind: str) -> str:
    """The system-prompt addition that makes the world model realise the fault."""
    if not kind:
        return ""
    return (f"{instruction_tag(kind)} For this turn the environment fails: {KINDS[kind]}. "
            "Predict exactly the observation the agent would receive from that failure, in the "
            "environment's own format; do not mention that it was injected.")
