"""A Gymnasium environment over a worldserve simulation session (``pip install worldserve[gym]``).

    env = WorldEnv(Client(target, api_key=key), domain="TERMINAL",
                   initial_state="Working directory /home/agent contains: notes.txt",
                   reward_fn=lambda obs, action, info: float("error" not in obs.lower()))
    obs, info = env.reset(seed=7)
    obs, reward, terminated, truncated, info = env.step("ls")

Observations and actions are text (``gymnasium.spaces.Text``). ``reset(seed=…)`` opens a new
session whose sampling seed comes from the environment's RNG, so a seeded episode is reproducible
on a deterministic engine. Rewards and termination are yours to define (``reward_fn``,
``terminated_fn``); the world model only predicts what the environment answers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from worldserve.sdk.client import Client
from worldserve.sdk.types import FaultPolicy

# Text spaces need an explicit alphabet: whitespace, ASCII and the Basic Multilingual Plane up to
# the CJK blocks. Other characters in an observation are shown as U+FFFD.
CHARSET = "".join(["\t\n\r", *map(chr, range(0x20, 0x7F)), *map(chr, range(0xA0, 0x3000)),
                   "\ufffd"])
_ALLOWED = frozenset(CHARSET)

RewardFn = Callable[[str, str, dict[str, Any]], float]
DoneFn = Callable[[str, str, dict[str, Any]], bool]


def _clip(text: str, limit: int) -> str:
    return "".join(c if c in _ALLOWED else "\ufffd" for c in text[:limit])


class WorldEnv(gym.Env[str, str]):
    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 - Gymnasium's own convention

    def __init__(self, client: Client, *, domain: str = "TERMINAL", task_instruction: str = "",
                 initial_state: str = "", reward_fn: RewardFn | None = None,
                 terminated_fn: DoneFn | None = None, max_turns: int = 32,
                 max_observation_chars: int = 8192, max_action_chars: int = 1024,
                 faults: FaultPolicy | None = None, session_options: dict[str, Any] | None = None,
                 render_mode: str | None = None) -> None:
        self.client = client
        self.domain = domain
        self.task_instruction = task_instruction
        self.initial_state = initial_state
        self.reward_fn = reward_fn or (lambda obs, action, info: 0.0)
        self.terminated_fn = terminated_fn or (lambda obs, action, info: False)
        self.max_turns = max_turns
        self.max_observation_chars = max_observation_chars
        self.faults = faults
        self.session_options = dict(session_options or {})
        self.render_mode = render_mode
        self.observation_space = spaces.Text(max_length=max_observation_chars, min_length=0,
                                             charset=CHARSET)
        self.action_space = spaces.Text(max_length=max_action_chars, min_length=1,
                                        charset=CHARSET)
        self.session_id: str | None = None
        self.turn = 0
        self._last = ""

    def _close_session(self) -> None:
        if self.session_id is not None:
            # already expired or closed: nothing left to release
            with contextlib.suppress(Exception):
                self.client.close_session(self.session_id)
            self.session_id = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._close_session()
        options = options or {}
        session_seed = int(self.np_random.integers(0, 2**31 - 1))
        info = self.client.create_session(
            self.domain, task_instruction=options.get("task_instruction", self.task_instruction),
            initial_state=options.get("initial_state", self.initial_state), seed=session_seed,
            faults=self.faults, **self.session_options)
        self.session_id, self.turn = info.session_id, 0
        self._last = _clip(info.initial_state, self.max_observation_chars)
        return self._last, {"turn": 0, "seed": session_seed}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.session_id is None:
            raise RuntimeError("call reset() before step()")
        result = self.client.step(self.session_id, action, expected_turn=self.turn)
        self.turn = result.turn
        observation = _clip(result.observation, self.max_observation_chars)
        info: dict[str, Any] = {  # deterministic for a seed: the session id is env.session_id
            "turn": result.turn, "fault_kind": result.fault_kind,
            "reasoning": result.reasoning, "usage": result.usage,
            "model_version": result.model_version, "seed": result.seed,
        }
        reward = float(self.reward_fn(observation, action, info))
        terminated = bool(self.terminated_fn(observation, action, info))
        truncated = self.turn >= self.max_turns and not terminated
        self._last = observation
        return observation, reward, terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._last
        return None

    def close(self) -> None:
        self._close_session()
        super().close()
