"""``WorldEnv``: the OpenEnv client of worldserve's environment (an ``EnvClient`` subclass).

    async with WorldEnv("http://127.0.0.1:8932", api_key="wsk_…") as env:
        result = await env.reset(domain="TERMINAL", initial_state="…", max_turns=8)
        result = await env.step(WorldAction(action="ls -la"))
        print(result.observation.observation, result.metadata["turn"])

Also usable synchronously (``WorldEnv(...).sync()``), as OpenEnv clients are.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from worldserve.frontends.openenv import WorldAction, WorldObservation, WorldState


class WorldEnv(EnvClient[WorldAction, WorldObservation, WorldState]):
    def __init__(self, base_url: str, api_key: str = "", **kwargs: Any) -> None:
        headers = dict(kwargs.pop("headers", None) or {})
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        super().__init__(base_url=base_url, headers=headers, **kwargs)

    def _step_payload(self, action: WorldAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[WorldObservation]:
        fields = dict(payload.get("observation") or {})
        obs = WorldObservation(observation=fields.get("observation", ""),
                               metadata=fields.get("metadata") or payload.get("metadata") or {},
                               done=bool(payload.get("done")), reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"),
                          done=bool(payload.get("done")), metadata=obs.metadata)

    def _parse_state(self, payload: dict[str, Any]) -> WorldState:
        return WorldState(**payload)
