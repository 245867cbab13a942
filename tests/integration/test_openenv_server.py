"""The OpenEnv server (its own process and environment, .venv-openenv) in front of a real gateway:
OpenEnv's own client runs episodes concurrently; each turn is in GetSession; keys, tenants and
quotas are the gateway's."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.conftest import repo_root
from tests.integration.backends import EchoBackend
from tests.integration.frontdoors import TenantStack, front_door, tenant_stack
from worldserve.sdk import AsyncClient
from worldserve.v1 import admin_pb2 as apb

pytestmark = pytest.mark.integration
EPISODES = 6


def openenv_python() -> str:
    """The OpenEnv environment's interpreter; `make install` builds it."""
    python = repo_root() / ".venv-openenv" / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: run `make install` (it builds the OpenEnv "
                    "environment next to .venv)")
    return str(python)


@pytest.fixture
async def stack(key_prefix: str, redis_url: str, database_url: str) -> AsyncIterator[TenantStack]:
    async with tenant_stack(key_prefix, redis_url, database_url, EchoBackend()) as s:
        yield s


@pytest.fixture
def openenv_port(stack: TenantStack, tmp_path: Path) -> Iterator[int]:
    with front_door("worldserve.frontends.openenv", stack.target, tmp_path, "openenv_port",
                    python=openenv_python()) as port:
        yield port


async def test_openenv_clients_run_concurrent_episodes_on_the_gateway(
        stack: TenantStack, openenv_port: int) -> None:
    key, other = await stack.tenant_key(), await stack.tenant_key()
    poor = await stack.tenant_key(apb.Quota(tokens_per_minute=10))
    script = repo_root() / "tests" / "integration" / "openenv_checks.py"
    # in a thread: the gateway serves from this test's event loop meanwhile
    done = await asyncio.to_thread(
        subprocess.run, [openenv_python(), str(script), "--url", f"http://127.0.0.1:{openenv_port}",
         "--key", key, "--other-key", other, "--poor-key", poor, "--episodes", str(EPISODES)],
        capture_output=True, text=True, timeout=240, cwd=repo_root())
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout)

    # WebSocket: every episode its own session, max_turns ends it, the receipt in the metadata
    episodes = facts["episodes"]
    sessions = {e["reset_meta"]["session_id"] for e in episodes}
    assert len(sessions) == EPISODES
    async with AsyncClient(stack.target, api_key=key) as ws:
        for i, e in enumerate(episodes):
            assert e["reset_obs"] == f"box {i}" and e["reset_meta"]["max_turns"] == 3
            steps = e["steps"]
            assert [s["meta"]["turn"] for s in steps] == [1, 2, 3]
            assert [s["done"] for s in steps] == [False, False, True]
            assert all(s["reward"] == 0.0 for s in steps)  # no rubric configured
            assert steps[0]["observation"] == f"did: echo {i}-0"
            assert steps[0]["meta"]["usage"]["output_tokens"] > 0
            assert steps[0]["meta"]["model_version"] and steps[0]["meta"]["fault_kind"] == ""
            state = e["state"]
            assert state["step_count"] == 3 and state["episode_id"] == f"ep-{i}"
            assert state["session_id"] == e["reset_meta"]["session_id"]
            got = await ws.get_session(state["session_id"], include_turns=True)
            assert [t.action for t in got.turns] == [f"echo {i}-{n}" for n in range(3)]
            assert [t.observation for t in got.turns] == [s["observation"] for s in steps]
            assert got.labels == {"run": "ci", "openenv-episode": f"ep-{i}"}

    # HTTP: the library's endpoints; /step names its session
    http = facts["http"]
    assert facts["health"]["status"] == "healthy"
    assert {"action", "session_id", "expected_turn"} <= set(facts["schema_action"])
    assert http["reset"]["metadata"]["tools"][0]["name"] == "ping"
    assert http["step_status"] == 200
    assert http["step"]["observation"]["observation"].startswith("did: {")
    assert http["step"]["observation"]["metadata"]["turn"] == 1
    assert http["state"]["step_count"] == 0  # stateless HTTP: no session behind /state
    assert http["no_key"] == 401 and http["bad_key"] == 401
    assert "unknown domain 'MARS'" in http["bad_param"]["detail"]
    assert http["other_tenant"] == 404  # another tenant's session does not exist
    assert http["quota"]["detail"].startswith("RESOURCE_EXHAUSTED")

    # WebSocket errors surface in the client's exception
    assert "UNAUTHENTICATED" in facts["ws_wrong_key"]
    assert "RESOURCE_EXHAUSTED" in facts["ws_quota"]
