"""Run in the OpenEnv environment (.venv-openenv) by test_openenv_server.py: drives the server with
OpenEnv's own client (``EnvClient`` over WebSocket) and its HTTP endpoints; prints JSON facts."""

from __future__ import annotations

import argparse
import asyncio
import json

import httpx

from worldserve.frontends.openenv import WorldAction
from worldserve.frontends.openenv_client import WorldEnv


async def ws_episode(url: str, key: str, i: int) -> dict[str, object]:
    async with WorldEnv(url, api_key=key, message_timeout_s=120) as env:
        first = await env.reset(domain="TERMINAL", initial_state=f"box {i}", seed=i, max_turns=3,
                                episode_id=f"ep-{i}", labels={"run": "ci"})
        results = []
        result = first
        while not result.done:
            result = await env.step(WorldAction(action=f"echo {i}-{len(results)}"))
            results.append({"observation": result.observation.observation,
                            "meta": result.metadata, "reward": result.reward,
                            "done": result.done})
        state = await env.state()
        return {"reset_meta": first.metadata, "reset_obs": first.observation.observation,
                "steps": results, "state": state.model_dump()}


async def ws_error(url: str, key: str, step: bool) -> str:
    try:
        async with WorldEnv(url, api_key=key, message_timeout_s=60) as env:
            await env.reset(domain="TERMINAL")
            if step:
                await env.step(WorldAction(action="ls"))
    except Exception as exc:
        return str(exc)
    return ""


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--key")
    ap.add_argument("--other-key")
    ap.add_argument("--poor-key")
    ap.add_argument("--episodes", type=int)
    a = ap.parse_args()
    out: dict[str, object] = {}
    out["episodes"] = await asyncio.gather(*(ws_episode(a.url, a.key, i)
                                             for i in range(a.episodes)))
    auth = {"Authorization": f"Bearer {a.key}"}
    with httpx.Client(base_url=a.url, timeout=60) as http:
        out["health"] = http.get("/health").json()
        out["schema_action"] = sorted(http.get("/schema").json()["action"]["properties"])
        reset = http.post("/reset", json={"domain": "MCP", "tools": [
            {"name": "ping", "description": "Ping.", "inputSchema": {"type": "object"}}]},
            headers=auth).json()
        sid = reset["metadata"]["session_id"]
        step = http.post("/step", json={"action": {"action": "{\"tool\": \"ping\", "
                                                   "\"arguments\": {}}", "session_id": sid}},
                         headers=auth)
        out["http"] = {"reset": reset, "step_status": step.status_code, "step": step.json(),
                       "state": http.get("/state", headers=auth).json(),
                       "no_key": http.post("/reset", json={}).status_code,
                       "bad_key": http.post("/reset", json={}, headers={
                           "Authorization": "Bearer wsk_wrong"}).status_code,
                       "bad_param": http.post("/reset", json={"domain": "MARS"},
                                              headers=auth).json(),
                       "other_tenant": http.post("/step", json={"action": {
                           "action": "ls", "session_id": sid}}, headers={
                           "Authorization": f"Bearer {a.other_key}"}).status_code,
                       "quota": http.post("/step", json={"action": {
                           "action": "ls", "session_id": http.post(
                               "/reset", json={}, headers={
                                   "Authorization": f"Bearer {a.poor_key}"}).json()[
                               "metadata"]["session_id"]}}, headers={
                           "Authorization": f"Bearer {a.poor_key}"}).json()}
    out["ws_wrong_key"] = await ws_error(a.url, "wsk_wrong", step=False)
    out["ws_quota"] = await ws_error(a.url, a.poor_key, step=True)
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
