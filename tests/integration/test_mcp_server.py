"""The simulated MCP server, driven by the official ``mcp`` client (v2) over Streamable HTTP and
stdio, in front of a real gateway (PostgreSQL tenants, Redis sessions)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.integration.backends import ToolBackend
from tests.integration.frontdoors import TenantStack, front_door, tenant_stack
from worldserve.sdk import AsyncClient, FaultPolicy, ToolSpec
from worldserve.v1 import admin_pb2 as apb

pytestmark = pytest.mark.integration

TOOLS = [
    {"name": "create_note", "description": "Create a note.",
     "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}},
                     "required": ["title"]}},
    {"name": "broken_sync", "description": "Sync notes (fails).",
     "inputSchema": {"type": "object", "properties": {}}},
]


@pytest.fixture
async def stack(key_prefix: str, redis_url: str, database_url: str) -> AsyncIterator[TenantStack]:
    async with tenant_stack(key_prefix, redis_url, database_url, ToolBackend()) as s:
        yield s


@pytest.fixture
def mcp_port(stack: TenantStack, tmp_path: Path) -> AsyncIterator[int]:
    with front_door("worldserve.frontends.mcp", stack.target, tmp_path, "mcp_port") as port:
        yield port


def mcp_client(port: int, session_id: str, key: str | None) -> Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    url = f"http://127.0.0.1:{port}/sessions/{session_id}/mcp"
    return Client(streamable_http_client(url, http_client=http))


async def mcp_session(stack: TenantStack, key: str, **kw: object) -> str:
    async with AsyncClient(stack.target, api_key=key) as ws:
        info = await ws.create_session("MCP", task_instruction="Keep notes.", tools=TOOLS,
                                       **kw)  # type: ignore[arg-type]
    return info.session_id


async def test_tools_are_listed_and_calls_step_the_session(stack: TenantStack,
                                                           mcp_port: int) -> None:
    key = await stack.tenant_key()
    sid = await mcp_session(stack, key, seed=7)
    async with mcp_client(mcp_port, sid, key) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["create_note", "broken_sync"]
        assert listed.tools[0].input_schema["required"] == ["title"]
        assert listed.tools[0].description == "Create a note."

        result = await client.call_tool("create_note", {"title": "groceries"})
        assert not result.is_error
        body = json.loads(result.content[0].text)  # type: ignore[union-attr]
        assert body == {"result": {"tool": "create_note", "args": {"title": "groceries"}}}
        assert result.structured_content == body
        receipt = (result.meta or {})["worldserve"]
        assert receipt["turn"] == 1 and receipt["session_id"] == sid
        assert receipt["model_version"] and receipt["usage"]["output_tokens"] > 0

        failed = await client.call_tool("broken_sync", {})
        assert failed.is_error  # the prediction is an error object: a tool error, not a protocol one

        with pytest.raises(MCPError) as info:  # an undeclared tool is refused before any model time
            await client.call_tool("drop_database", {})
        assert "Unknown tool" in info.value.message

    async with AsyncClient(stack.target, api_key=key) as ws:
        got = await ws.get_session(sid, include_turns=True)
    assert got.turn_count == 2  # the unknown tool did not step
    assert json.loads(got.turns[0].action) == {"tool": "create_note",
                                               "arguments": {"title": "groceries"}}
    assert [t.name for t in got.tools] == ["create_note", "broken_sync"]
    assert all(isinstance(t, ToolSpec) for t in got.tools)
    # the prompt the model saw lists the tools in the form it was trained on
    prompt = stack.backend.prompts[-1]  # type: ignore[attr-defined]
    assert "MCP server tools:\n- create_note(title: string): Create a note." in prompt


async def test_forks_and_faults_work_as_for_grpc_steps(stack: TenantStack, mcp_port: int) -> None:
    key = await stack.tenant_key()
    sid = await mcp_session(stack, key, faults=FaultPolicy(kinds=("timeout",), turns=(2,)))
    async with mcp_client(mcp_port, sid, key) as client:
        first = await client.call_tool("create_note", {"title": "a"})
        assert (first.meta or {})["worldserve"]["fault_kind"] == ""
    async with AsyncClient(stack.target, api_key=key) as ws:
        fork = await ws.fork(sid)
    async with mcp_client(mcp_port, fork.session_id, key) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["create_note",
                                                                       "broken_sync"]
        second = await client.call_tool("create_note", {"title": "b"})
        receipt = (second.meta or {})["worldserve"]
        assert receipt["turn"] == 2 and receipt["fault_kind"] == "timeout"
    async with AsyncClient(stack.target, api_key=key) as ws:
        assert (await ws.get_session(sid)).turn_count == 1  # the parent is untouched
        assert (await ws.get_session(fork.session_id)).turn_count == 2


async def test_keys_tenants_and_quotas_are_the_gateways(stack: TenantStack, mcp_port: int) -> None:
    key = await stack.tenant_key()
    sid = await mcp_session(stack, key)
    url = f"http://127.0.0.1:{mcp_port}/sessions/{sid}/mcp"
    # no key at all: HTTP 401 before any MCP processing
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 401 and "Bearer" in r.headers["www-authenticate"]
    assert httpx.get(f"http://127.0.0.1:{mcp_port}/health").json() == {"status": "ok"}

    async with mcp_client(mcp_port, sid, "wsk_not_a_key") as client:
        with pytest.raises(MCPError) as info:
            await client.list_tools()
    assert info.value.message.startswith("UNAUTHENTICATED")

    other = await stack.tenant_key()
    async with mcp_client(mcp_port, sid, other) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("create_note", {"title": "x"})
    assert info.value.message.startswith("NOT_FOUND")  # another tenant's session does not exist

    poor = await stack.tenant_key(apb.Quota(tokens_per_minute=10))
    poor_sid = await mcp_session(stack, poor)
    async with mcp_client(mcp_port, poor_sid, poor) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("create_note", {"title": "x"})
    assert info.value.message.startswith("RESOURCE_EXHAUSTED")
    assert info.value.data["subject"].endswith(":tokens_per_minute")


async def test_stdio_serves_one_session(stack: TenantStack) -> None:
    key = await stack.tenant_key()
    sid = await mcp_session(stack, key)
    worldserve = str(Path(sys.executable).parent / "worldserve")
    params = StdioServerParameters(command=worldserve, args=[
        "mcp", "--stdio", "--session", sid, "--target", stack.target, "--api-key", key])
    async with Client(params) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["create_note",
                                                                       "broken_sync"]
        result = await client.call_tool("create_note", {"title": "from stdio"})
        assert json.loads(result.content[0].text)["result"]["args"] == {  # type: ignore[union-attr]
            "title": "from stdio"}
    async with AsyncClient(stack.target, api_key=key) as ws:
        assert (await ws.get_session(sid)).turn_count == 1


async def test_tools_are_checked_and_only_mcp_sessions_declare_them(stack: TenantStack) -> None:
    from worldserve.sdk import InvalidArgument

    key = await stack.tenant_key()
    async with AsyncClient(stack.target, api_key=key) as ws:
        for bad, says in [([{"name": "a b"}], "must be 1-128 characters"),
                          ([{"name": "x"}, {"name": "x"}], "declared twice"),
                          ([{"name": "x", "inputSchema": {"type": "array"}}], "describe an object")]:
            with pytest.raises(InvalidArgument, match=says):
                await ws.create_session("MCP", tools=bad)
        with pytest.raises(InvalidArgument, match="only by MCP sessions"):
            await ws.create_session("TERMINAL", tools=TOOLS)
        sid = (await ws.create_session("MCP", tools=TOOLS)).session_id
        await ws.step(sid, '{"tool": "create_note", "arguments": {"title": "t"}}')
        record = json.loads((await ws.export(sid)).content)
    assert record["worldserve"]["tools"] == TOOLS  # exports carry the declared tools
    assert record["prompt"][0].count("- create_note(title: string)") == 1


async def test_the_example_agent_session_runs_on_the_real_model(make_settings, redis_url: str,
                                                               tmp_path: Path) -> None:
    """examples/clients/mcp_session.py against the committed checkpoint on real Triton."""
    import asyncio
    import subprocess

    from tests.conftest import TEST_KEY, repo_root
    from tests.integration.helpers import running_gateway

    settings = make_settings(default_max_tokens=160)
    async with running_gateway(settings, redis_url) as gw:
        target = f"127.0.0.1:{gw.port}"
        with front_door("worldserve.frontends.mcp", target, tmp_path, "mcp_port") as port:
            done = await asyncio.to_thread(subprocess.run, [
                sys.executable, str(repo_root() / "examples" / "clients" / "mcp_session.py"),
                "--api-key", TEST_KEY, "--gateway", target, "--mcp", f"http://127.0.0.1:{port}"],
                capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)  # the model's answers, for a reader of the test log
    lines = done.stdout.splitlines()
    assert lines[0] == "tools: create_note, get_note"
    calls = [line for line in lines if " -> " in line]
    assert len(calls) == 3 and all("turn " in c for c in calls)
    assert [c.split("turn ")[1].split(",")[0] for c in calls] == ["1", "2", "3"]
