"""The gateway's router: new sessions get a version, steps get that version's backend.

``StaticRouter`` serves the one model of the settings (the dev stack, tests). ``RegistryRouter``
follows the operator's Redis registry: a snapshot at start, pub/sub notifications, and a periodic
resync in case a notification was missed; backends are created per endpoint and kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Callable
from typing import Protocol

import redis.asyncio as aioredis

from worldserve.backends.base import Backend
from worldserve.backends.prompt_limit import PromptLimit
from worldserve.domains.modelcard import ALL_DOMAINS
from worldserve.errors import BackendUnavailable, NotFound
from worldserve.keyspace import Keyspace
from worldserve.routing.choice import Entry, View, choose

log = logging.getLogger(__name__)


class Router(Protocol):
    def resolve(self, requested: str, default_model: str = "") -> str: ...
    def target(self, label: str) -> tuple[Backend, str]: ...
    def models(self) -> list[tuple[str, list[str]]]: ...
    def domains(self, label: str) -> tuple[str, ...]: ...
    def prompt_limit(self, label: str) -> PromptLimit: ...
    async def start(self) -> None: ...
    async def ready(self) -> bool: ...
    async def aclose(self) -> None: ...


class StaticRouter:
    def __init__(self, label: str, backend: Backend, chat_template: str,
                 domains: tuple[str, ...] = ALL_DOMAINS, limit: PromptLimit | None = None
                 ) -> None:
        self.label = label
        self.backend = backend
        self.chat_template = chat_template
        self._domains = domains
        self._limit = limit or PromptLimit()

    def resolve(self, requested: str, default_model: str = "") -> str:
        name = self.label.split("@", 1)[0]
        if requested in ("", "stable", name, self.label, f"{name}:stable"):
            return self.label
        raise NotFound(f"unknown model {requested!r}; this deployment serves {self.label}")

    def target(self, label: str) -> tuple[Backend, str]:
        return self.backend, self.chat_template

    def models(self) -> list[tuple[str, list[str]]]:
        return [(self.label, ["stable", self.label.split("@", 1)[0]])]

    def domains(self, label: str) -> tuple[str, ...]:
        return self._domains

    def prompt_limit(self, label: str) -> PromptLimit:
        """The model's context and tokenizer (unknown ones: the model server still checks)."""
        return self._limit

    async def start(self) -> None:
        pass

    async def ready(self) -> bool:
        return await self.backend.ready()

    async def aclose(self) -> None:
        await self.backend.aclose()


class RegistryRouter:
    def __init__(self, client: aioredis.Redis, prefix: str,
                 backend_for: Callable[[Entry], Backend], default_template: str,
                 resync_s: float = 10.0, rng: random.Random | None = None) -> None:
        self._r = client
        keys = Keyspace(prefix)
        self._models_key = keys.registry_models
        self._aliases_key = keys.registry_aliases
        self._channel = keys.registry_changed
        self._backend_for = backend_for
        self._default_template = default_template
        self._resync_s = resync_s
        self._rng = rng or random.Random()
        self.view = View()
        self._backends: dict[tuple[str, str, tuple[str, ...]], Backend] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def refresh(self) -> None:
        pipe = self._r.pipeline(transaction=False)
        pipe.hgetall(self._models_key)
        pipe.hgetall(self._aliases_key)
        models, aliases = await pipe.execute()
        entries = {}
        for label, raw in models.items():
            key = label.decode() if isinstance(label, bytes) else label
            try:
                entries[key] = Entry.from_dict(key, json.loads(raw))
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring malformed registry entry %s", key)
        self.view = View(entries, {(k.decode() if isinstance(k, bytes) else k):
                                   (v.decode() if isinstance(v, bytes) else v)
                                   for k, v in aliases.items()})

    async def start(self) -> None:
        await self.refresh()
        self._tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._resync())]

    async def _listen(self) -> None:
        while True:
            try:
                pubsub = self._r.pubsub()
                await pubsub.subscribe(self._channel)
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis away: the resync loop keeps trying too
                log.warning("registry subscription lost (%s); retrying", exc)
                await asyncio.sleep(1.0)

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self._resync_s)
            with contextlib.suppress(Exception):
                await self.refresh()

    def resolve(self, requested: str, default_model: str = "") -> str:
        default = default_model or (self.view.models() or [""])[0]
        return choose(self.view, requested, default, self._rng)

    def target(self, label: str) -> tuple[Backend, str]:
        entry = self.view.entries.get(label)
        if entry is None:
            raise BackendUnavailable(f"model version {label} is no longer served")
        key = (entry.endpoint, entry.triton_model, entry.replicas)
        if key not in self._backends:
            self._backends[key] = self._backend_for(entry)
        return self._backends[key], entry.chat_template or self._default_template

    def models(self) -> list[tuple[str, list[str]]]:
        aliases: dict[str, list[str]] = {}
        for alias, label in self.view.aliases.items():
            aliases.setdefault(label, []).append(alias)
        return [(label, sorted(aliases.get(label, []))) for label in sorted(self.view.entries)]

    def domains(self, label: str) -> tuple[str, ...]:
        entry = self.view.entries.get(label)
        return entry.domains if entry is not None else ALL_DOMAINS

    def prompt_limit(self, label: str) -> PromptLimit:
        """The entry's ``max_model_len``; no tokenizer here, so the model server counts."""
        entry = self.view.entries.get(label)
        return PromptLimit(entry.max_model_len if entry is not None else 0)

    async def ready(self) -> bool:
        """Some serving version's backend answers Triton ServerReady/ModelReady. Probing also
        lets a replica set take back replicas that recovered."""
        labels = [e.label for e in self.view.entries.values() if e.state == "serving"]
        results = await asyncio.gather(*(self.target(label)[0].ready() for label in labels),
                                       return_exceptions=True)
        return any(ok is True for ok in results)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        for backend in self._backends.values():
            await backend.aclose()
