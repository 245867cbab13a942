"""MCP episodes: random tool catalogues answered by a real local JSON-RPC tool server over HTTP.

Each episode declares 3–5 tools (varied names and argument schemas, from one vocabulary split)
in its initial state. Calls go over HTTP to a real server in this process (``ToolServer``)
that keeps the tools' state and answers JSON-RPC results and errors; faults are provoked for
real: the server answers 429 with ``Retry-After``, 500, 403 or a cut-off body, or stalls past
the client's timeout, or the client dials a port where nothing listens, or the server answers
from the state as it was before the last change.

Action: ``{"tool": NAME, "arguments": {...}}``. Observation: ``{"result": ...}`` or
``{"error": {"code": ..., "message": ...}}`` as the client received it (a malformed body raw).
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from worldserve.domains.tools import HEADER, signature
from worldserve.training.words import Vocab

CLIENT_TIMEOUT_S = 0.3
FAULT_KINDS = ("timeout", "http_500", "http_429", "permission_denied", "malformed_json",
               "stale_data", "network_unreachable")
TOOL_KINDS = ("create", "get", "list", "delete", "update", "search", "add", "multiply",
              "count_words", "upper", "set", "lookup")
OPTIONAL_KINDS = ("list", "delete", "update", "search", "add", "multiply", "count_words", "upper",
                  "set")  # a catalogue holds create, get and one to three of these
# The tools whose answer is computed from their arguments, by kind: their names (a catalogue may
# prefix them) and what they do. The others keep records.
COMPUTING = {"add": ("add", [("a", "integer"), ("b", "integer")], "Add two integers."),
             "multiply": ("multiply", [("x", "integer"), ("y", "integer")],
                          "Multiply two integers."),
             "count_words": ("count_words", [("text", "string")], "Count the words of a text."),
             "upper": ("to_upper", [("text", "string")], "Upper-case a text.")}
_TYPES = ("string", "integer")


def computing_kind(name: str) -> str | None:
    """The ``COMPUTING`` kind of the tool called ``name`` (a catalogue may prefix the names of
    its tools), else None."""
    return next((kind for kind, (tool, *_) in COMPUTING.items()
                 if name == tool or name.endswith("_" + tool)), None)


@dataclass
class Tool:
    name: str
    kind: str
    noun: str
    params: list[tuple[str, str]]  # (name, type), all required
    description: str

    def signature(self) -> str:
        return signature(self.name, self.params, self.description)


class ToolError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass
class ToolState:
    tools: dict[str, Tool]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    kv: dict[str, str] = field(default_factory=dict)
    counter: int = 0

    def call(self, name: str, args: Any) -> Any:
        tool = self.tools.get(name)
        if tool is None:
            raise ToolError(-32601, f"Unknown tool: {name}")
        if not isinstance(args, dict):
            raise ToolError(-32602, "Arguments must be an object")
        for pname, ptype in tool.params:
            if pname not in args:
                raise ToolError(-32602, f"Missing required argument: {pname}")
            if ptype == "integer" and not isinstance(args[pname], int):
                raise ToolError(-32602, f"Invalid type for {pname}: expected integer")
            if ptype == "string" and not isinstance(args[pname], str):
                raise ToolError(-32602, f"Invalid type for {pname}: expected string")
        extra = sorted(set(args) - {p for p, _ in tool.params})
        if extra:
            raise ToolError(-32602, f"Unexpected argument: {extra[0]}")
        return getattr(self, f"_{tool.kind}")(tool, args)

    def _mine(self, tool: Tool) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.records.items() if k.startswith(f"{tool.noun}-")}

    def _create(self, tool: Tool, args: dict[str, Any]) -> Any:
        self.counter += 1
        rid = f"{tool.noun}-{self.counter}"
        self.records[rid] = {"id": rid, **args}
        return {"id": rid, "created": True}

    def _get(self, tool: Tool, args: dict[str, Any]) -> Any:
        rid = args["id"]
        if rid not in self.records or not rid.startswith(f"{tool.noun}-"):
            raise ToolError(-32004, f"{tool.noun} not found: {rid}")
        return self.records[rid]

    def _list(self, tool: Tool, args: dict[str, Any]) -> Any:
        return {"items": sorted(self._mine(tool)), "count": len(self._mine(tool))}

    def _delete(self, tool: Tool, args: dict[str, Any]) -> Any:
        rid = args["id"]
        if rid not in self._mine(tool):
            raise ToolError(-32004, f"{tool.noun} not found: {rid}")
        del self.records[rid]
        return {"deleted": rid}

    def _update(self, tool: Tool, args: dict[str, Any]) -> Any:
        rid = args["id"]
        if rid not in self._mine(tool):
            raise ToolError(-32004, f"{tool.noun} not found: {rid}")
        self.records[rid][args["field"]] = args["value"]
        return self.records[rid]

    def _search(self, tool: Tool, args: dict[str, Any]) -> Any:
        q = args["query"].lower()
        hits = [r["id"] for r in self._mine(tool).values()
                if any(q in str(v).lower() for k, v in r.items() if k != "id")]
        return {"matches": hits}

    def _add(self, tool: Tool, args: dict[str, Any]) -> Any:
        return {"sum": args["a"] + args["b"]}

    def _multiply(self, tool: Tool, args: dict[str, Any]) -> Any:
        return {"product": args["x"] * args["y"]}

    def _count_words(self, tool: Tool, args: dict[str, Any]) -> Any:
        return {"words": len(args["text"].split())}

    def _upper(self, tool: Tool, args: dict[str, Any]) -> Any:
        return {"text": args["text"].upper()}

    def _set(self, tool: Tool, args: dict[str, Any]) -> Any:
        self.kv[args["key"]] = args["value"]
        return {"stored": args["key"]}

    def _lookup(self, tool: Tool, args: dict[str, Any]) -> Any:
        if args["key"] not in self.kv:
            raise ToolError(-32004, f"key not found: {args['key']}")
        return {"key": args["key"], "value": self.kv[args["key"]]}


def check_focus(focus: Mapping[str, float]) -> None:
    """A focus (tool kind → factor) names only kinds a catalogue may hold or lack."""
    unknown = set(focus) - set(OPTIONAL_KINDS)
    if unknown:
        raise ValueError(f"no focusable tool kind {sorted(unknown)}; kinds: "
                         f"{', '.join(OPTIONAL_KINDS)}")


def make_catalog(rng: random.Random, v: Vocab, focus: Mapping[str, float] | None = None
                 ) -> dict[str, Tool]:
    """3–5 tools over one or two nouns, with random field names. ``focus`` (tool kind →
    factor): each focused kind a catalogue lacks joins it with probability one half; without
    a focus the catalogue is drawn exactly as before (same random calls)."""
    noun = v.word().lower()
    fields = [(v.word().lower(), rng.choice(_TYPES)) for _ in range(rng.randint(1, 2))]
    if len({f for f, _ in fields}) < len(fields):
        fields = fields[:1]
    prefix = rng.choice(["", "", f"{v.word().lower()}_"])
    makers = {
        "create": (f"create_{noun}", fields, f"Create a {noun} record."),
        "get": (f"get_{noun}", [("id", "string")], f"Fetch a {noun} by id."),
        "list": (f"list_{noun}s", [], f"List the ids of every {noun}."),
        "delete": (f"delete_{noun}", [("id", "string")], f"Delete a {noun}."),
        "update": (f"update_{noun}", [("id", "string"), ("field", "string"), ("value", "string")],
                   f"Set one field of a {noun}."),
        "search": (f"search_{noun}s", [("query", "string")], f"Find {noun}s whose fields contain the query."),
        **COMPUTING,
        "set": (f"{v.word().lower()}_set", [("key", "string"), ("value", "string")],
                "Store a value under a key."),
        "lookup": ("", [("key", "string")], "Read the value stored under a key."),
    }
    kinds = ["create", "get", *rng.sample(list(OPTIONAL_KINDS), rng.randint(1, 3))]
    for kind in sorted(focus or {}):
        if kind not in kinds and rng.random() < 0.5:
            kinds.append(kind)
    if "set" in kinds:
        kinds.append("lookup")
        makers["lookup"] = (makers["set"][0].replace("_set", "_get"), *makers["lookup"][1:])
    tools: dict[str, Tool] = {}
    for kind in kinds:
        name, params, desc = makers[kind]
        name = prefix + name
        tools[name] = Tool(name, kind, noun, list(params), desc)
    return tools


def describe(tools: dict[str, Tool]) -> str:
    return "\n".join([HEADER, *(t.signature() for t in tools.values())])


class ToolServer:
    """A real JSON-RPC-over-HTTP tool server on 127.0.0.1 for the calling thread's episodes.

    The fault of the next request is set by the client in a header; the server then fails for
    real (status, body, delay) the way that fault describes.
    """

    def __init__(self) -> None:
        self.state: ToolState | None = None
        self.stale: ToolState | None = None
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner._answer(self, json.loads(body), self.headers.get("X-Fault", ""))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        with socket.socket() as s:  # a port where nothing listens: the unreachable server
            s.bind(("127.0.0.1", 0))
            self.dead_port = s.getsockname()[1]

    def _answer(self, h: BaseHTTPRequestHandler, req: dict[str, Any], fault: str) -> None:
        assert self.state is not None
        status, headers = 200, {}
        if fault == "timeout":
            time.sleep(CLIENT_TIMEOUT_S * 2)
        if fault == "http_429":
            status, headers = 429, {"Retry-After": str(req.get("retry_after", 5))}
            payload: dict[str, Any] = {"error": {"code": 429, "message": "Too Many Requests",
                                                 "retry_after": int(headers["Retry-After"])}}
        elif fault == "http_500":
            status, payload = 500, {"error": {"code": 500, "message": "Internal Server Error"}}
        elif fault == "permission_denied":
            status, payload = 403, {"error": {"code": 403, "message":
                                              f"Forbidden: not allowed to call {req['params']['name']}"}}
        else:
            state = self.stale if fault == "stale_data" and self.stale else self.state
            try:
                payload = {"result": state.call(req["params"]["name"], req["params"]["arguments"])}
            except ToolError as exc:
                payload = {"error": {"code": exc.code, "message": exc.message}}
        data = json.dumps({"jsonrpc": "2.0", "id": req["id"], **payload}).encode()
        if fault == "malformed_json":
            data = data[: max(8, len(data) * 3 // 5)]
        h.send_response(status)
        for k, val in headers.items():
            h.send_header(k, val)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        with contextlib.suppress(OSError):  # the client gave up (timeout)
            h.wfile.write(data)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class McpEpisode:
    """One MCP episode against ``server``."""

    def __init__(self, rng: random.Random, vocab: Vocab, server: ToolServer,
                 focus: Mapping[str, float] | None = None) -> None:
        self.rng, self.v, self.server = rng, vocab, server
        self.focus = dict(focus or {})  # tool kind -> how much more often it is called
        self.tools: dict[str, Tool] = {}
        self.calls = 0

    def setup(self) -> str:
        self.tools = make_catalog(self.rng, self.v, self.focus)
        self.server.state = ToolState(self.tools)
        self.server.stale = None
        return describe(self.tools)

    def _value(self, ptype: str) -> Any:
        return self.rng.randint(0, 99) if ptype == "integer" else self.v.line(1, 3)

    def next_call(self) -> tuple[str, str, str]:
        """(action, kind, reasoning)."""
        r = self.rng
        state = self.server.state
        assert state is not None
        ids = sorted(state.records)
        tools = list(self.tools.values())
        tool = (r.choices(tools, [self.focus.get(t.kind, 1.0) for t in tools])[0] if self.focus
                else r.choice(tools))
        if not ids and tool.kind in ("get", "update", "delete") and r.random() < 0.7:
            tool = next(t for t in self.tools.values() if t.kind == "create")
        args: dict[str, Any] = {}
        for pname, ptype in tool.params:
            if pname == "id":
                args[pname] = (r.choice(ids) if ids and r.random() < 0.8
                               else f"{tool.noun}-{r.randint(1, 9)}")
            elif pname == "key" and tool.kind == "lookup" and state.kv and r.random() < 0.8:
                args[pname] = r.choice(sorted(state.kv))
            elif pname == "field":
                args[pname] = r.choice([p for p, _ in self.tools[next(
                    n for n, t in self.tools.items() if t.kind == "create")].params])
            elif pname == "query" and ids and r.random() < 0.7:
                rec = state.records[r.choice(ids)]
                vals = [str(v) for k, v in rec.items() if k != "id"]  # none: created bare
                words = r.choice(vals).split() if vals else []
                args[pname] = r.choice(words or [self.v.word()])
            else:
                args[pname] = self._value(ptype)
        kind = "call"
        if r.random() < 0.12:
            kind = "error"
            roll = r.random()
            if roll < 0.35:
                name = f"{self.v.word().lower()}_{r.choice(['info', 'run', 'fetch'])}"
                return json.dumps({"tool": name, "arguments": args}), kind, f"{name} is not a declared tool."
            if roll < 0.7 and tool.params:
                args.pop(tool.params[0][0])
            elif tool.params:
                p, t = tool.params[-1]
                args[p] = self.v.word() if t == "integer" else r.randint(0, 99)
        why = f"{tool.name} answers from the server's state."
        return json.dumps({"tool": tool.name, "arguments": args}), kind, why

    def run(self, action: str, fault: str = "") -> str:
        """Call the tool over HTTP; the observation the client reports."""
        call = json.loads(action)
        self.calls += 1
        port = self.server.dead_port if fault == "network_unreachable" else self.server.port
        body = json.dumps({"jsonrpc": "2.0", "id": self.calls, "method": "tools/call",
                           "params": {"name": call["tool"], "arguments": call["arguments"]},
                           "retry_after": self.rng.randint(1, 60)}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body,
                                     headers={"Content-Type": "application/json", "X-Fault": fault})
        if fault not in ("stale_data",) and self.server.state is not None:
            self.server.stale = copy.deepcopy(self.server.state)
        try:
            with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT_S) as resp:
                raw = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raw = exc.read().decode()
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            code = -32001 if isinstance(reason, TimeoutError | socket.timeout) else -32000
            message = "Request timed out" if code == -32001 else f"Connection failed: {reason}"
            return json.dumps({"error": {"code": code, "message": message}})
        try:
            msg = json.loads(raw)
        except json.JSONDecodeError:
            return raw  # what the server sent, cut off
        return json.dumps({k: msg[k] for k in ("result", "error") if k in msg})
