"""The tools block of MCP sessions: checks, the prompt form, call actions (pure)."""

from __future__ import annotations

import json
import random

import pytest

from worldserve.domains.tools import (
    MAX_TOOLS,
    ToolSpec,
    call_action,
    check_tools,
    describe,
    is_error_observation,
    parse_schema,
    state_with_tools,
)
from worldserve.training.mcp_tools import McpEpisode, Tool, ToolServer, ToolState
from worldserve.training.mcp_tools import describe as training_describe
from worldserve.training.words import Vocab


def test_the_prompt_block_is_the_training_form() -> None:
    trained = {"add": Tool("add", "add", "", [("a", "integer"), ("b", "integer")], "Add two integers.")}
    declared = ToolSpec("add", "Add two integers.", {
        "type": "object", "required": ["a", "b"],
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})
    assert describe([declared]) == training_describe(trained)
    optional = ToolSpec("find", "Find.", {"type": "object", "properties": {
        "q": {"type": ["string", "null"]}, "n": {}}, "required": ["n"]})
    assert describe([optional]).splitlines()[1] == "- find(q?: string|null, n: any): Find."


def test_state_with_tools() -> None:
    spec = ToolSpec("ping")
    assert state_with_tools([], "s") == "s"
    assert state_with_tools([spec], "") == "MCP server tools:\n- ping(): "
    assert state_with_tools([spec], "x = 1") == "MCP server tools:\n- ping(): \nx = 1"


@pytest.mark.parametrize(("tools", "says"), [
    ([ToolSpec("")], "1-128 characters"),
    ([ToolSpec("a" * 129)], "1-128 characters"),
    ([ToolSpec("a/b")], "1-128 characters"),
    ([ToolSpec("a"), ToolSpec("a")], "declared twice"),
    ([ToolSpec("a", "d" * 5000)], "description exceeds"),
    ([ToolSpec("a", "", {"type": "string"})], "describe an object"),
    ([ToolSpec(f"t{i}") for i in range(MAX_TOOLS + 1)], f"at most {MAX_TOOLS}"),
])
def test_bad_tools_are_refused(tools: list[ToolSpec], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check_tools("MCP", tools)


def test_only_mcp_sessions_declare_tools() -> None:
    assert check_tools("TERMINAL", []) == []
    with pytest.raises(ValueError, match="only by MCP"):
        check_tools("TERMINAL", [ToolSpec("a")])


def test_schemas() -> None:
    assert parse_schema("", "t") == {"type": "object", "properties": {}}
    assert parse_schema('{"type": "object"}', "t") == {"type": "object"}
    for text, says in [("{", "not JSON"), ("[1]", "JSON object"), ("1" * 20000, "exceeds")]:
        with pytest.raises(ValueError, match=says):
            parse_schema(text, "t")
    spec = ToolSpec.from_dict({"name": "a", "inputSchema": {"type": "object"}})
    assert ToolSpec.from_dict(spec.to_dict()) == spec


def test_calls_and_error_observations() -> None:
    assert call_action("add", {"a": 1}) == '{"tool": "add", "arguments": {"a": 1}}'
    assert call_action("ping", None) == '{"tool": "ping", "arguments": {}}'
    assert not is_error_observation('{"result": 3}')
    assert is_error_observation('{"error": {"code": 429, "message": "slow down"}}')
    assert is_error_observation("<html>502 Bad Gateway")
    assert is_error_observation("[1, 2]")


def test_a_search_query_is_drawn_for_a_record_with_no_fields() -> None:
    """A create tool whose random field is named ``id`` makes a record of its id alone; a
    search query drawn from its fields then has none to draw from (this crashed a 16,000-episode
    collection in session 30). It draws a word instead."""
    tools = {"search_widgets": Tool("search_widgets", "search", "widget", [("query", "string")],
                                    "Find widgets whose fields contain the query.")}
    rng = random.Random(5)
    server = ToolServer()
    try:
        server.state = ToolState(tools, records={"widget-1": {"id": "widget-1"}})
        episode = McpEpisode(rng, Vocab(rng), server)
        episode.tools = tools
        queries = set()
        for _ in range(30):
            action, _, _ = episode.next_call()
            queries.add(json.loads(action)["arguments"].get("query"))
    finally:
        server.close()
    assert queries - {None}
    assert all(q for q in queries if q is not None)
