"""An MCP agent's view of worldserve: a simulated tool server per session.

    .venv/bin/python examples/clients/mcp_session.py --api-key "$WORLDSERVE_API_KEY"

Opens an MCP session with two declared tools through the SDK, then uses the official MCP client
(Streamable HTTP) exactly as an agent would: list the tools, call them, read the results. The
world model answers every call. Needs `worldserve up` (gateway on :50051, MCP server on :8931).
"""

from __future__ import annotations

import argparse
import asyncio

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from worldserve.sdk import AsyncClient

TOOLS = [
    {"name": "create_note", "description": "Create a note record.",
     "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}},
                     "required": ["title"]}},
    {"name": "get_note", "description": "Fetch a note by id.",
     "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}},
                     "required": ["id"]}},
]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api-key", required=True)
    ap.add_argument("--gateway", default="127.0.0.1:50051")
    ap.add_argument("--mcp", default="http://127.0.0.1:8931")
    args = ap.parse_args()
    async with AsyncClient(args.gateway, api_key=args.api_key) as ws:
        session = await ws.create_session("MCP", task_instruction="Keep notes.", tools=TOOLS)
    url = f"{args.mcp}/sessions/{session.session_id}/mcp"
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {args.api_key}"}, timeout=300)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(t.name for t in tools.tools))
        for name, arguments in [("create_note", {"title": "groceries"}),
                                ("get_note", {"id": "note-1"}),
                                ("get_note", {"id": "note-99"})]:
            result = await client.call_tool(name, arguments)
            text = result.content[0].text  # type: ignore[union-attr]
            receipt = (result.meta or {}).get("worldserve", {})
            print(f"{name}({arguments}) -> {text}  [error={result.is_error}, "
                  f"turn {receipt.get('turn')}, {receipt.get('model_version')}]")
    print(f"session {session.session_id}: `worldserve export {session.session_id}` "
          "writes the trajectory")


if __name__ == "__main__":
    asyncio.run(main())
