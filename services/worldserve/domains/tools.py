"""The tools a simulated MCP server offers: checks and the block the prompt shows (pure).

An MCP session declares its tools (name, description, input JSON Schema, as MCP's ``tools/list``
describes them). The model reads them as the first lines of the environment's initial state, in
the form its training data uses (``MCP server tools:`` then one ``- name(arg: type): text`` line
per tool), and the simulated MCP server (``worldserve mcp``) lists them back to clients.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_TOOLS = 64
MAX_DESCRIPTION_BYTES = 4096
MAX_SCHEMA_BYTES = 16 * 1024
# MCP's tool-name rule: 1-128 characters of letters, digits, '_', '-' and '.'.
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
HEADER = "MCP server tools:"


def _empty_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=_empty_schema)

    def to_dict(self) -> dict[str, Any]:
        """The stored (and exported) form, in MCP's spelling."""
        return {"name": self.name, "description": self.description,
                "inputSchema": self.input_schema}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolSpec:
        schema = data.get("inputSchema", data.get("input_schema"))
        return cls(str(data.get("name", "")), str(data.get("description") or ""),
                   dict(schema) if schema else _empty_schema())


def parse_schema(text: str, tool: str) -> dict[str, Any]:
    """An input schema given as JSON text (empty = no arguments); ValueError when unusable."""
    if not text.strip():
        return _empty_schema()
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SCHEMA_BYTES:
        raise ValueError(f"tool {tool!r}: input_schema exceeds {MAX_SCHEMA_BYTES} bytes")
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"tool {tool!r}: input_schema is not JSON ({exc.args[0]})") from None
    if not isinstance(schema, dict):
        raise ValueError(f"tool {tool!r}: input_schema must be a JSON object")
    return schema


def check_tools(domain: str, tools: Iterable[ToolSpec]) -> list[ToolSpec]:
    """The tools as declared, or ValueError naming the first problem."""
    listed = list(tools)
    if listed and domain != "MCP":
        raise ValueError(f"tools are declared only by MCP sessions, not {domain}")
    if len(listed) > MAX_TOOLS:
        raise ValueError(f"at most {MAX_TOOLS} tools may be declared, got {len(listed)}")
    seen: set[str] = set()
    for tool in listed:
        if not _NAME.fullmatch(tool.name):
            raise ValueError(f"tool name {tool.name[:64]!r} must be 1-128 characters of "
                             "letters, digits, '_', '-' and '.'")
        if tool.name in seen:
            raise ValueError(f"tool {tool.name!r} is declared twice")
        seen.add(tool.name)
        if len(tool.description.encode("utf-8", "surrogatepass")) > MAX_DESCRIPTION_BYTES:
            raise ValueError(f"tool {tool.name!r}: description exceeds "
                             f"{MAX_DESCRIPTION_BYTES} bytes")
        kind = tool.input_schema.get("type", "object")
        if kind != "object":
            raise ValueError(f"tool {tool.name!r}: input_schema must describe an object, "
                             f"not {kind!r}")
    return listed


def signature(name: str, params: Iterable[tuple[str, str]], description: str) -> str:
    """One tool's line in the prompt: ``- name(arg: type, other?: type): description``."""
    args = ", ".join(f"{n}: {t}" for n, t in params)
    return f"- {name}({args}): {description}"


def _params(schema: Mapping[str, Any]) -> list[tuple[str, str]]:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    out = []
    for pname, prop in props.items() if isinstance(props, dict) else ():
        kind = prop.get("type", "any") if isinstance(prop, dict) else "any"
        kind = "|".join(map(str, kind)) if isinstance(kind, list) else str(kind)
        out.append((pname if pname in required else f"{pname}?", kind))
    return out


def describe(tools: Iterable[ToolSpec]) -> str:
    """The tools block the model reads at the top of an MCP session's initial state."""
    lines = [signature(t.name, _params(t.input_schema), t.description) for t in tools]
    return "\n".join([HEADER, *lines])


def state_with_tools(tools: Iterable[ToolSpec], initial_state: str) -> str:
    """The initial state as the prompt shows it: the tools block first, when there are tools."""
    listed = list(tools)
    if not listed:
        return initial_state
    block = describe(listed)
    return f"{block}\n{initial_state}" if initial_state else block


def call_action(name: str, arguments: Mapping[str, Any] | None) -> str:
    """A tool call as an MCP session's action (the form the model was trained on)."""
    return json.dumps({"tool": name, "arguments": dict(arguments or {})}, ensure_ascii=False)


def is_error_observation(observation: str) -> bool:
    """True when a predicted MCP observation is an error object (``{"error": …}``) or no JSON."""
    try:
        value = json.loads(observation)
    except ValueError:
        return True
    return not isinstance(value, dict) or "error" in value
