"""Budget forcing keeps the step on its replica: the continuation carries the step's affinity."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from worldserve.backends.base import Chunk, Completion
from worldserve.backends.replicas import ReplicaSet
from worldserve.gateway.generation import Meter, generate
from worldserve.sessions.records import Sampling


class Recording:
    """Answers a long reasoning first, then a short observation; records every request."""

    def __init__(self) -> None:
        self.requests: list[Completion] = []

    async def stream(self, request: Completion, timeout_s: float) -> AsyncIterator[Chunk]:
        self.requests.append(request)
        pieces = (["<think>", " a", " b", " c", " d", " e"] if len(self.requests) == 1
                  else ["ok", "\n</predicted_observation>"])
        for i, piece in enumerate(pieces):
            yield Chunk(piece, 10, 1, "stop" if i == len(pieces) - 1 else "")

    async def ready(self) -> bool:
        return True

    async def aclose(self) -> None:
        pass


def test_the_forced_continuation_lands_on_the_replica_of_the_step() -> None:
    replicas = {f"r{i}": Recording() for i in range(2)}
    backend = ReplicaSet(replicas)  # type: ignore[arg-type]
    sampling = Sampling(temperature=0.0, top_p=1.0, max_tokens=50, reasoning_budget=3)

    async def step() -> str:
        text: list[str] = []
        async for _ in generate(backend, "PROMPT", sampling, None, time.monotonic() + 10,
                                Meter(), text, affinity="s_session"):
            pass
        return "".join(text)

    answer = asyncio.run(step())
    assert answer.endswith("ok\n</predicted_observation>")
    used = [name for name, r in replicas.items() if r.requests]
    assert len(used) == 1  # both calls on one replica: the one holding the prompt's KV cache
    first, second = replicas[used[0]].requests
    assert first.affinity == second.affinity == "s_session"
    assert second.prompt.startswith("PROMPT<think> a b") and second.max_tokens < 50
