"""Roll out episodes against worldserve through OpenEnv (WebSocket), many at once.

    .venv-openenv/bin/python examples/clients/openenv_rollout.py \
        --url http://127.0.0.1:8932 --api-key "$WORLDSERVE_API_KEY" --episodes 4

Each episode is one worldserve session (reset opens it); every step's receipt (turn, usage,
fault kind, model version) comes back in the observation's metadata. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from worldserve.frontends.openenv import WorldAction
from worldserve.frontends.openenv_client import WorldEnv

ACTIONS = ["mkdir notes", "echo 'milk' > notes/list.txt", "cat notes/list.txt", "ls notes"]


async def episode(url: str, api_key: str, index: int, max_turns: int) -> dict[str, object]:
    async with WorldEnv(url, api_key=api_key, message_timeout_s=300) as env:
        result = await env.reset(domain="TERMINAL", task_instruction="Keep a shopping list.",
                                 initial_state="$ pwd\n/home/agent", seed=index,
                                 max_turns=max_turns, episode_id=f"example-{index}")
        session_id = result.metadata["session_id"]
        steps = []
        while not result.done:
            t0 = time.perf_counter()
            result = await env.step(WorldAction(action=ACTIONS[len(steps) % len(ACTIONS)]))
            steps.append({"observation": result.observation.observation,
                          "turn": result.metadata["turn"], "reward": result.reward,
                          "fault_kind": result.metadata["fault_kind"],
                          "seconds": round(time.perf_counter() - t0, 4)})
        state = await env.state()
        return {"session_id": session_id, "steps": steps, "state_turns": state.step_count,
                "model_version": result.metadata["model_version"]}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8932")
    ap.add_argument("--api-key", required=True)
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=3)
    args = ap.parse_args()
    episodes = await asyncio.gather(*(episode(args.url, args.api_key, i, args.max_turns)
                                      for i in range(args.episodes)))
    print(json.dumps({"episodes": episodes}, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
