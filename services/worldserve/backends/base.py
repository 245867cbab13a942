"""The backend port: stream a completion for a rendered prompt."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str
    num_input_tokens: int = 0
    num_output_tokens: int = 0  # tokens behind this chunk
    finish_reason: str = ""


@dataclass(frozen=True, slots=True)
class Completion:
    prompt: str
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    affinity: str = ""  # session id: steps of one session prefer one replica (prefix/KV reuse)


class Backend(Protocol):
    def stream(self, request: Completion, timeout_s: float) -> AsyncGenerator[Chunk, None]:
        """Chunks of the completion; raises BackendUnavailable / DeadlineExceeded."""

    async def ready(self) -> bool: ...

    async def aclose(self) -> None: ...
