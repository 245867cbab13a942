"""Version choice for new sessions (pure): aliases, pinned versions, weighted splits.

A session is pinned to the version chosen at creation for its whole life; weights (canary
traffic) only split *new* sessions. Draining versions take no new session but stay routable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from worldserve.domains.modelcard import ALL_DOMAINS, normalize_domains
from worldserve.errors import NotFound


@dataclass(frozen=True, slots=True)
class Entry:
    """A registry entry: the one contract the operator writes (``to_dict``) and the gateway
    reads (``from_dict``) — docs/ARCHITECTURE.md, "registry entry"."""

    label: str  # name@version
    model: str
    version: str
    endpoint: str
    triton_model: str = "worldmodel"
    weight: int = 0
    state: str = "serving"  # serving | draining
    chat_template: str = ""
    replicas: tuple[str, ...] = ()  # per-replica endpoints, when the registry lists them
    domains: tuple[str, ...] = ALL_DOMAINS  # what the version simulates (its model card)
    runtime: str = ""  # the WorldModel runtime that serves it (triton-vllm, worldserve, …)
    drain_until: float = 0.0  # epoch s; a draining entry is removed after it
    protocol: str = "triton"  # triton (gRPC ModelStreamInfer) | openai (/v1/completions)
    max_model_len: int = 0  # the version's context length in tokens; 0 = unknown

    @classmethod
    def from_dict(cls, label: str, raw: dict[str, Any]) -> Entry:
        return cls(label, str(raw["model"]), str(raw["version"]), str(raw["endpoint"]),
                   str(raw.get("triton_model") or "worldmodel"), int(raw.get("weight", 0)),
                   str(raw.get("state", "serving")), str(raw.get("chat_template") or ""),
                   tuple(str(e) for e in raw.get("endpoints") or ()),
                   normalize_domains(raw.get("domains")), str(raw.get("runtime") or ""),
                   float(raw.get("drain_until") or 0.0), str(raw.get("protocol") or "triton"),
                   int(raw.get("max_model_len") or 0))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object stored under the label (what ``from_dict`` reads back)."""
        out: dict[str, Any] = {
            "model": self.model, "version": self.version, "endpoint": self.endpoint,
            "triton_model": self.triton_model, "weight": self.weight, "state": self.state,
            "chat_template": self.chat_template, "domains": list(self.domains)}
        if self.replicas:
            out["endpoints"] = list(self.replicas)
        if self.runtime:
            out["runtime"] = self.runtime
        if self.drain_until:
            out["drain_until"] = self.drain_until
        if self.protocol != "triton":
            out["protocol"] = self.protocol
        if self.max_model_len:
            out["max_model_len"] = self.max_model_len
        return out


@dataclass(frozen=True, slots=True)
class View:
    entries: dict[str, Entry] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # "name:stable" -> "name@v"

    def models(self) -> list[str]:
        return sorted({e.model for e in self.entries.values()})


def choose(view: View, requested: str, default_model: str, rng: random.Random) -> str:
    """The ``name@version`` a new session is pinned to."""
    if "@" in requested:
        entry = view.entries.get(requested)
        if entry is None or entry.state != "serving":
            raise NotFound(f"model version {requested} is not served")
        return requested
    name, _, alias = requested.partition(":")
    if requested in ("stable", "canary"):
        name, alias = default_model, requested
    name = name or default_model
    if alias:
        label = view.aliases.get(f"{name}:{alias}")
        if label is None or label not in view.entries:
            raise NotFound(f"model {name} has no {alias} version")
        return label
    candidates = [e for e in view.entries.values()
                  if e.model == name and e.state == "serving" and e.weight > 0]
    if not candidates:
        served = ", ".join(view.models()) or "none"
        raise NotFound(f"model {name or '(default)'} is not served (served: {served})")
    total = sum(e.weight for e in candidates)
    pick = rng.uniform(0, total)
    for e in sorted(candidates, key=lambda e: e.label):
        pick -= e.weight
        if pick <= 0:
            return e.label
    return candidates[-1].label
