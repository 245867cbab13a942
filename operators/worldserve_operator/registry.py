"""The model registry in Redis that gateways read (versions, endpoints, weights, templates).

    {prefix}:registry:models    hash  "name@version" -> JSON entry (state serving|draining)
    {prefix}:registry:aliases   hash  "name:stable" / "name:canary" -> "name@version"
    {prefix}:registry:changed   pub/sub channel; the model name is published on every change

A version removed from a WorldModel is not deleted at once: it turns ``draining`` (weight 0, so
no new session lands on it) until ``drain_until``, letting pinned sessions finish or expire.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import redis

from worldserve.keyspace import Keyspace
from worldserve.routing.choice import Entry


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Registry:
    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.r = client
        keys = Keyspace(prefix)
        self.models_key = keys.registry_models
        self.aliases_key = keys.registry_aliases
        self.channel = keys.registry_changed

    def entries(self, model: str) -> dict[str, dict[str, Any]]:
        raw = self.r.hgetall(self.models_key)
        out = {}
        for label, value in raw.items():  # type: ignore[union-attr]
            entry = json.loads(value)
            if entry.get("model") == model:
                out[_text(label)] = entry
        return out

    def sync(self, model: str, entries: dict[str, dict[str, Any]], aliases: dict[str, str],
             now: float, drain_seconds: int) -> dict[str, float]:
        """Write the current versions; versions no longer listed start (or keep) draining.

        Returns the draining labels with their deadline.
        """
        existing = self.entries(model)
        draining: dict[str, float] = {}
        pipe = self.r.pipeline(transaction=True)
        for label, entry in entries.items():
            pipe.hset(self.models_key, label, json.dumps(entry, sort_keys=True))
        for label, old in existing.items():
            if label in entries:
                continue
            current = Entry.from_dict(label, old)
            until = current.drain_until or now + drain_seconds
            draining[label] = until
            drained = replace(current, state="draining", weight=0, drain_until=until)
            pipe.hset(self.models_key, label, json.dumps(drained.to_dict(), sort_keys=True))
        for field in self.r.hkeys(self.aliases_key):  # type: ignore[union-attr]
            if _text(field).startswith(f"{model}:"):
                pipe.hdel(self.aliases_key, field)
        for field, target in aliases.items():
            pipe.hset(self.aliases_key, field, target)
        pipe.publish(self.channel, model)
        pipe.execute()
        return draining

    def remove(self, labels: list[str], model: str) -> None:
        if not labels:
            return
        pipe = self.r.pipeline(transaction=True)
        pipe.hdel(self.models_key, *labels)
        pipe.publish(self.channel, model)
        pipe.execute()

    def remove_model(self, model: str) -> None:
        self.remove(list(self.entries(model)), model)
        for field in self.r.hkeys(self.aliases_key):  # type: ignore[union-attr]
            if _text(field).startswith(f"{model}:"):
                self.r.hdel(self.aliases_key, field)
