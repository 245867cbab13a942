"""Play episodes against the real sandbox and tools; turn each step into a training sample.

A sample is the exact prompt the gateway would render for that step (same templates, same
history window) plus the target answer: a short reasoning block and the real observation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from worldserve.domains.rendering import OBS_CLOSE, OBS_OPEN, PastTurn, PromptInput, build_messages
from worldserve.domains.templates import Domain, system_prompt
from worldserve.training.mcp_tools import ToolBox
from worldserve.training.terminal import TerminalEpisode

TERMINAL_TASKS = [
    "Inspect the files in the working directory and summarise them.",
    "Create a backup of the notes and count the lines in every file.",
    "Find which files mention an error and clean up the directory.",
    "Set up a small project layout and record progress in a todo file.",
]
MCP_TASKS = [
    "Use the tools to compute a budget and remember the results.",
    "Store a few settings in the key-value store and read them back.",
    "Take notes while converting some measurements.",
]


@dataclass(frozen=True)
class Sample:
    domain: str
    episode: int
    turn: int
    messages: list[dict[str, str]]
    target: str
    observation: str
    # Everything an AgentWorldBench-style record needs.
    action: str


def target_text(reasoning: str, observation: str) -> str:
    return f"<think>\n{reasoning}\n</think>\n\n{OBS_OPEN}\n{observation}\n{OBS_CLOSE}"


def _episode(domain: Domain, index: int, rng: random.Random, turns: int, window: int
             ) -> Iterator[Sample]:
    if domain is Domain.TERMINAL:
        env: TerminalEpisode | ToolBox = TerminalEpisode(rng)
        initial = env.setup()  # type: ignore[union-attr]
        task = rng.choice(TERMINAL_TASKS)
        step = env.next_command  # type: ignore[union-attr]
    else:
        env = ToolBox(rng)
        initial = env.describe()
        task = rng.choice(MCP_TASKS)
        step = env.next_call
    history: list[PastTurn] = []
    for t in range(turns):
        action, why = step()
        observation = env.run(action)
        prompt = PromptInput(system_prompt(domain), task, initial, history, action)
        yield Sample(domain.value, index, t + 1, build_messages(prompt, window),
                     target_text(why, observation), observation, action)
        history.append(PastTurn(action, observation))


def collect(episodes: int, seed: int, window: int, max_turns: int = 8) -> list[Sample]:
    """``episodes`` episodes, alternating Terminal (2 of 3) and MCP (1 of 3)."""
    rng = random.Random(seed)
    samples: list[Sample] = []
    for index in range(episodes):
        domain = Domain.MCP if index % 3 == 2 else Domain.TERMINAL
        samples.extend(_episode(domain, index, rng, rng.randint(2, max_turns), window))
    return samples


def write_jsonl(samples: list[Sample], path: str) -> None:
    with open(path, "w") as fh:
        for s in samples:
            fh.write(json.dumps(asdict(s)) + "\n")
