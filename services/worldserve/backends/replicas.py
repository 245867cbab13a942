"""One backend over several model-server replicas: affinity, bounded load, ejection, failover.

A call goes to the session's preferred replica (``backends.affinity``). If that replica fails
before sending its first chunk, it is ejected for ``eject_s`` and the call is retried on the next
replica — nothing reached the client, and the turn is committed once, at the end, so no duplicate
turn is possible. A failure after the first chunk is not retried here (the client already saw
text); the step fails and can be retried with the same ``expected_turn``.

``policy="round_robin"`` ignores the session and rotates over healthy replicas — what a plain
Kubernetes Service does; it exists as the baseline that affinity is measured against.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator

from worldserve.backends.affinity import choose
from worldserve.backends.base import Backend, Chunk, Completion
from worldserve.errors import BackendUnavailable
from worldserve.observability.metrics import REPLICA_ROUTES

log = logging.getLogger(__name__)

MAX_TRACKED_SESSIONS = 100_000


class ReplicaSet:
    def __init__(self, replicas: dict[str, Backend], eject_s: float = 10.0,
                 policy: str = "affinity", load_floor: int = 1) -> None:
        if not replicas:
            raise ValueError("a replica set needs at least one replica")
        if policy not in ("affinity", "round_robin"):
            raise ValueError(f"unknown replica policy {policy!r}")
        self.replicas = replicas
        self.policy = policy
        self.load_floor = load_floor
        self._turn = itertools.count()
        self._served_by: OrderedDict[str, str] = OrderedDict()  # affinity key -> last replica
        self.eject_s = eject_s
        self.load: dict[str, int] = dict.fromkeys(replicas, 0)
        self._ejected: dict[str, float] = {}

    def healthy(self) -> list[str]:
        now = time.monotonic()
        return [r for r in self.replicas if self._ejected.get(r, 0.0) <= now]

    def eject(self, name: str) -> None:
        self._ejected[name] = time.monotonic() + self.eject_s
        log.warning("replica %s ejected for %.0fs", name, self.eject_s)

    async def stream(self, request: Completion, timeout_s: float) -> AsyncGenerator[Chunk, None]:
        healthy = self.healthy() or list(self.replicas)  # all ejected: try them anyway
        order = self._order(request, healthy)
        last: Exception | None = None
        for name in order:
            started = False
            self.load[name] += 1
            stream = self.replicas[name].stream(request, timeout_s)
            try:
                async with contextlib.aclosing(stream):
                    async for chunk in stream:
                        if not started:
                            started = True
                            self._note_route(request.affinity, name)
                        yield chunk
                return
            except BackendUnavailable as exc:
                if started:
                    raise
                self.eject(name)
                last = exc
            finally:
                self.load[name] -= 1
        raise BackendUnavailable(f"every model-server replica failed: {last}")

    def _note_route(self, key: str, name: str) -> None:
        """Count whether this session stayed on its replica (where its KV cache is)."""
        if not key:
            return
        previous = self._served_by.pop(key, None)
        self._served_by[key] = name
        if len(self._served_by) > MAX_TRACKED_SESSIONS:
            self._served_by.popitem(last=False)
        REPLICA_ROUTES.labels("first" if previous is None else
                              "same" if previous == name else "moved").inc()

    def _order(self, request: Completion, healthy: list[str]) -> list[str]:
        if self.policy == "round_robin":
            start = next(self._turn) % len(healthy)
            return healthy[start:] + healthy[:start]
        key = request.affinity or request.prompt[:64]
        return choose(key, healthy, self.load, floor=self.load_floor,
                      previous=self._served_by.get(key))

    async def ready(self) -> bool:
        results = await asyncio.gather(*(b.ready() for b in self.replicas.values()),
                                       return_exceptions=True)
        for name, ok in zip(self.replicas, results, strict=True):
            if ok is True:
                self._ejected.pop(name, None)
            else:
                self.eject(name)
        return any(ok is True for ok in results)

    async def aclose(self) -> None:
        for backend in self.replicas.values():
            await backend.aclose()
