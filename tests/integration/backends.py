"""Scripted model backends for gateway tests (a real model cannot misbehave on demand)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from worldserve.backends.base import Chunk, Completion

GOOD = ["<think>\nfine", "\n</think>\n\n<predicted", "_observation>\nhello\n</predicted_",
        "observation>"]
BAD = ["<think>\nhm\n</think>\n\n<predicted_observation>\nhalf"]
# Every scripted call reports 10 input tokens and 1 output token per piece.
INPUT_TOKENS = 10


class ScriptedBackend:
    def __init__(self, answers: list[list[str]], input_tokens: int = INPUT_TOKENS) -> None:
        self.answers = answers
        self.input_tokens = input_tokens  # reported per call; tests may change it
        self.prompts: list[str] = []

    async def stream(self, request: Completion, timeout_s: float) -> AsyncIterator[Chunk]:
        self.prompts.append(request.prompt)
        pieces = self.answers[min(len(self.prompts) - 1, len(self.answers) - 1)]
        for i, piece in enumerate(pieces):
            yield Chunk(piece, self.input_tokens, 1, "stop" if i == len(pieces) - 1 else "")

    async def ready(self) -> bool:
        return True

    async def aclose(self) -> None:
        pass


class SlowBackend(ScriptedBackend):
    def __init__(self, answers: list[list[str]], delay_s: float = 0.25) -> None:
        super().__init__(answers)
        self.delay_s = delay_s

    async def stream(self, request: Completion, timeout_s: float) -> AsyncIterator[Chunk]:
        async for chunk in super().stream(request, timeout_s):
            await asyncio.sleep(self.delay_s)
            yield chunk


class EchoBackend(ScriptedBackend):
    """Answers ``did: <action>`` for the prompt's last action, so histories can be checked."""

    def __init__(self) -> None:
        super().__init__([GOOD])

    async def stream(self, request: Completion, timeout_s: float) -> AsyncIterator[Chunk]:
        self.prompts.append(request.prompt)
        action = request.prompt.rsplit("**Action:** ", 1)[-1].split("<|im_end|>", 1)[0].strip()
        pieces = ["<think>\nok\n</think>\n\n<predicted_observation>\n",
                  f"did: {action}", "\n</predicted_observation>"]
        for i, piece in enumerate(pieces):
            yield Chunk(piece, self.input_tokens, 1, "stop" if i == len(pieces) - 1 else "")


class ToolBackend(ScriptedBackend):
    """Answers an MCP call (``{"tool": …, "arguments": …}``) with ``{"result": {"tool", "args"}}``,
    or an error object for a tool whose name starts with ``broken``."""

    def __init__(self) -> None:
        super().__init__([GOOD])

    async def stream(self, request: Completion, timeout_s: float) -> AsyncIterator[Chunk]:
        import json

        self.prompts.append(request.prompt)
        action = request.prompt.rsplit("**Action:** ", 1)[-1].split("<|im_end|>", 1)[0].strip()
        call = json.loads(action)
        answer = ({"error": {"code": -32000, "message": f"{call['tool']} failed"}}
                  if call["tool"].startswith("broken") else
                  {"result": {"tool": call["tool"], "args": call["arguments"]}})
        pieces = ["<think>\nok\n</think>\n\n<predicted_observation>\n", json.dumps(answer),
                  "\n</predicted_observation>"]
        for i, piece in enumerate(pieces):
            yield Chunk(piece, self.input_tokens, 1, "stop" if i == len(pieces) - 1 else "")
