"""One model call of a step: stream, split reasoning from observation, meter, budget-force.

Pure of sessions and quotas: the simulator decides what to ask; this module asks the backend and
turns chunks into deltas.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from worldserve.backends.base import Backend, Chunk, Completion
from worldserve.domains.parsing import Part, StreamSplitter
from worldserve.domains.rendering import OBS_OPEN, THINK_CLOSE
from worldserve.sessions.records import Sampling


@dataclass(frozen=True, slots=True)
class Delta:
    part: Part
    text: str


@dataclass(slots=True)
class Meter:
    """Token use of one step, over every backend call it made (retries are paid for too)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    finish: str = ""
    _call_input: int = 0

    def start_call(self) -> None:
        self._call_input = 0

    def add(self, chunk: Chunk, reasoning: bool) -> None:
        if chunk.num_input_tokens > self._call_input:  # reported per call, on every chunk
            self.input_tokens += chunk.num_input_tokens - self._call_input
            self._call_input = chunk.num_input_tokens
        self.output_tokens += chunk.num_output_tokens
        if reasoning:
            self.reasoning_tokens += chunk.num_output_tokens
        self.finish = chunk.finish_reason or self.finish


async def generate(backend: Backend, prompt: str, sampling: Sampling, seed: int | None,
                   deadline: float, meter: Meter, text: list[str], affinity: str = ""
                   ) -> AsyncIterator[Delta]:
    """One attempt: stream the completion into ``text``, yielding deltas.

    With a reasoning budget, reasoning that reaches it is cut: the stream is dropped and the
    model is asked to continue from its reasoning plus a forced ``</think>`` and observation
    opening (budget forcing), so the observation still comes.
    """
    splitter = StreamSplitter()
    budget = sampling.reasoning_budget
    request = Completion(prompt, sampling.max_tokens, sampling.temperature, sampling.top_p,
                         seed, affinity)
    reasoning_before = meter.reasoning_tokens  # the budget is per attempt
    for _ in range(2):
        forced = False
        meter.start_call()
        stream = backend.stream(request, max(deadline - time.monotonic(), 0.001))
        async with contextlib.aclosing(stream):  # leaving early cancels the backend call
            async for chunk in stream:
                text.append(chunk.text)
                before_observation = not splitter.in_observation
                meter.add(chunk, before_observation)
                for part, delta in splitter.feed(chunk.text):
                    yield Delta(part, delta)
                reasoning_here = meter.reasoning_tokens - reasoning_before
                if (budget and before_observation and reasoning_here >= budget
                        and not splitter.in_observation):
                    forced = True
                    break
        if not forced:
            return
        suffix = f"\n{THINK_CLOSE}\n\n{OBS_OPEN}\n"
        text.append(suffix)
        for part, delta in splitter.feed(suffix):
            yield Delta(part, delta)
        remaining = sampling.max_tokens - (meter.reasoning_tokens - reasoning_before)
        # The continuation keeps the step's affinity: it must land on the replica that holds
        # the prompt's KV cache.
        request = dataclasses.replace(request, prompt=prompt + "".join(text),
                                      max_tokens=max(remaining, 1))
