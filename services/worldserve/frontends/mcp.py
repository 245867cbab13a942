"""A simulated MCP server: each session's declared tools, answered by the world model.

``worldserve mcp`` serves Streamable HTTP at ``/sessions/{session_id}/mcp`` (the MCP spec has no
session handshake, so the session lives in the path); ``worldserve mcp --stdio --session ID``
serves one session over stdio for desktop agents. ``tools/list`` returns the tools the session
declared at CreateSession; ``tools/call`` steps the session with the call as its action
(``{"tool": name, "arguments": {...}}``) and returns the predicted observation as the tool's
result, ``isError`` when the prediction is an error object. Faults, seeds and forks work as for
any gRPC step: a fork is served at its own session id. Built on the official ``mcp`` SDK (v2,
low-level ``Server``); the bearer key of each request is passed on to the gateway.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from worldserve.domains.tools import ToolSpec, call_action, is_error_observation
from worldserve.errors import WorldserveError
from worldserve.frontends.upstream import Upstream, bearer_key, describe_error
from worldserve.sdk import StepResult
from worldserve.settings import Settings

PATH = "/sessions/{session_id}/mcp"
SERVER_NAME = "worldserve-simulated-mcp"
# JSON-RPC codes for gateway refusals; -32000..-32099 are the spec's server-defined range.
_CODES = {"INVALID_ARGUMENT": types.INVALID_PARAMS, "NOT_FOUND": types.INVALID_PARAMS,
          "UNAUTHENTICATED": -32001, "PERMISSION_DENIED": -32003,
          "RESOURCE_EXHAUSTED": -32029, "UNAVAILABLE": -32050, "DEADLINE_EXCEEDED": -32054}


@dataclass(frozen=True, slots=True)
class Binding:
    """Which session a request is for, with whose key."""

    session_id: str
    api_key: str


def refusal(exc: WorldserveError) -> MCPError:
    """A gateway error as the MCP error a client shows (status, message, retry hint in data)."""
    info = describe_error(exc)
    return MCPError(_CODES.get(exc.code_name, -32000), f"{exc.code_name}: {exc}", info)


def tool_entry(spec: ToolSpec) -> types.Tool:
    return types.Tool(name=spec.name, description=spec.description or None,
                      input_schema=spec.input_schema)


def tool_result(step: StepResult) -> types.CallToolResult:
    """A predicted observation as a tool result; the turn's receipt in ``_meta``."""
    structured = None
    try:
        value = json.loads(step.observation)
        structured = value if isinstance(value, dict) else None
    except ValueError:
        pass
    meta = {"worldserve": {"session_id": step.session_id, "turn": step.turn,
                           "fault_kind": step.fault_kind, "model_version": step.model_version,
                           "reasoning": step.reasoning, "finish_reason": step.finish_reason,
                           "usage": {"input_tokens": step.usage.input_tokens,
                                     "output_tokens": step.usage.output_tokens,
                                     "reasoning_tokens": step.usage.reasoning_tokens}}}
    return types.CallToolResult(
        content=[types.TextContent(text=step.observation)], structured_content=structured,
        is_error=is_error_observation(step.observation), _meta=meta)


def binding_from_request(ctx: ServerRequestContext[Any, Any]) -> Binding:
    """HTTP: the session from the path, the key from the Authorization header."""
    request = ctx.request
    if request is None:
        raise MCPError(types.INVALID_REQUEST, "no HTTP request behind this call")
    key = bearer_key(request.headers.get("authorization")) or ""
    return Binding(str(request.path_params.get("session_id", "")), key)


class DeclaredTools:
    """The tools each session declared, fetched once per (key, session) and kept in a bounded
    LRU for ``ttl_s``: a session's tools never change after CreateSession (a fork is another
    session), so a tools/call costs one gateway call, the Step, instead of two. Keyed by the
    bearer key too, so a key the gateway has not accepted for that session never reads another
    key's entry; the TTL bounds how long a revoked key can still list what it listed before (its
    tools/call is refused at once: the Step goes to the gateway)."""

    def __init__(self, load: Callable[[Binding], Awaitable[list[ToolSpec]]],
                 size: int = 4096, ttl_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._load, self._size, self._ttl, self._clock = load, size, ttl_s, clock
        self._entries: OrderedDict[Binding, tuple[float, list[ToolSpec]]] = OrderedDict()

    async def get(self, binding: Binding) -> list[ToolSpec]:
        entry = self._entries.get(binding)
        if entry is not None and self._clock() - entry[0] < self._ttl:
            self._entries.move_to_end(binding)
            return entry[1]
        tools = await self._load(binding)  # refusals are raised, never cached
        self._entries[binding] = (self._clock(), tools)
        self._entries.move_to_end(binding)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return tools


def build_server(upstream: Upstream,
                 resolve: Callable[[ServerRequestContext[Any, Any]], Binding]) -> Server[Any]:
    """The MCP server: tools/list and tools/call of the session ``resolve`` names."""

    async def fetch(binding: Binding) -> list[ToolSpec]:
        try:
            info = await upstream.client(binding.api_key).get_session(binding.session_id)
        except WorldserveError as exc:
            raise refusal(exc) from None
        return info.tools

    declared = DeclaredTools(fetch).get

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool_entry(t) for t in await declared(resolve(ctx))])

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        binding = resolve(ctx)
        names = {t.name for t in await declared(binding)}
        if params.name not in names:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        action = call_action(params.name, params.arguments)
        try:
            step = await upstream.client(binding.api_key).step(binding.session_id, action)
        except WorldserveError as exc:
            raise refusal(exc) from None
        return tool_result(step)

    return Server(SERVER_NAME, version="1",
                  instructions="Tools of a simulated environment, answered by a world model.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


class RequireBearer:
    """401 for a request to a session without a bearer key (the gateway judges the key)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).startswith("/sessions/"):
            headers = dict(scope.get("headers") or [])
            if bearer_key(headers.get(b"authorization", b"").decode("latin-1")) is None:
                response = JSONResponse({"error": "missing bearer key (Authorization: Bearer …)"},
                                        status_code=401,
                                        headers={"WWW-Authenticate": 'Bearer realm="worldserve"'})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(upstream: Upstream, host: str = "127.0.0.1") -> Starlette:
    """Streamable HTTP at ``/sessions/{session_id}/mcp`` (stateless: no session handshake),
    and ``/health``."""

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    server = build_server(upstream, binding_from_request)
    app = server.streamable_http_app(streamable_http_path=PATH, stateless_http=True,
                                     json_response=True, host=host,
                                     custom_starlette_routes=[Route("/health", health)])
    app.add_middleware(RequireBearer)
    return app


async def serve_stdio(upstream: Upstream, binding: Binding) -> None:
    """One session over stdio (``worldserve mcp --stdio --session ID``)."""
    from mcp.server.stdio import stdio_server

    server = build_server(upstream, lambda _ctx: binding)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve(settings: Settings, stdio_session: str = "", api_key: str = "") -> None:
    """Run the MCP front door until interrupted (HTTP, or stdio for one session)."""
    import anyio

    upstream = Upstream(settings.frontend_upstream_target)
    if stdio_session:
        anyio.run(serve_stdio, upstream, Binding(stdio_session, api_key))
        return
    import uvicorn

    uvicorn.run(http_app(upstream, settings.mcp_host), host=settings.mcp_host,
                port=settings.mcp_port, log_level="warning")


if __name__ == "__main__":
    serve(Settings())
