"""The engine port (pure): what the model server asks of a generation engine.

``engines`` holds the implementations and the factory; every implementation imports this module
and nothing imports an implementation except the factory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from worldserve.modelserver.contract import GenerationRequest


@dataclass(frozen=True, slots=True)
class Delta:
    """A piece of one request's output; the last one carries finish_reason."""

    text: str
    num_input_tokens: int
    num_output_tokens: int  # tokens behind this delta
    finish_reason: str | None = None
    error: str | None = None


Sink = Callable[[Delta], None]


class EngineUnavailable(RuntimeError):
    """The engine cannot run here (missing package, no device)."""


class ContextExceeded(ValueError):
    """The request's prompt plus max_tokens does not fit the model's context (message: the
    contract's CONTEXT_EXCEEDED text, which the gateway turns into INVALID_ARGUMENT)."""


class Engine(Protocol):
    def submit(self, request: GenerationRequest, sink: Sink) -> Callable[[], None]:
        """Start generating; deltas go to ``sink`` (from any thread); returns a cancel function."""

    def close(self) -> None: ...


def cpu_threads(setting: int, usable_cores: int, torch_default: int) -> int:
    """torch's intra-op threads on CPU: the setting, or (0) every usable core but one, and never
    more than torch's own default (its count of physical cores).

    The model server's own Python (Triton's frontend, streaming the deltas) and, on a small
    machine, the gateway, Redis and the client share its cores; OpenMP threads spin, so one
    thread per core slowed every decode step whenever anything else ran (issue 16,
    docs/ARCHITECTURE.md §5)."""
    return setting if setting > 0 else max(1, min(usable_cores - 1, torch_default))


def pick_device(setting: str) -> str:
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return setting
