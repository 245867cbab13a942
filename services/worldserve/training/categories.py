"""The report group of a held-out turn (pure): a command kind's category, "state", or a fault."""

from __future__ import annotations

import json

from worldserve.training.collect import Episode
from worldserve.training.mcp_tools import COMPUTING, computing_kind
from worldserve.training.terminal import KIND_CATEGORY

_WRITES = ("echo_new", "echo_append", "printf_new", "cp", "mv", "touch")
_READS = ("listing", "reading", "counting", "searching", "transforming")


def category_of(ep: Episode, k: int) -> str:
    """The report group of turn ``k``: the fault kind, "state" (reads what an earlier turn of
    the episode wrote), else the command kind's category (MCP: call / error)."""
    turn = ep.turns[k]
    if turn.fault:
        return f"fault:{turn.fault}"
    if ep.domain == "MCP":
        return f"mcp:{turn.kind}"
    category = KIND_CATEGORY.get(turn.kind, "other")
    if category in _READS:
        written = {w for t in ep.turns[:k] if t.kind in _WRITES for w in t.action.split()[-1:]}
        if any(w.strip("'") in turn.action.split() for w in written):
            return "state"
    return category


def files_changed_before(ep: Episode, k: int) -> bool:
    """Whether a turn of this Terminal episode before turn ``k`` changed its files: a command
    of the writing kinds that ran (no fault). A listing after one must show the change; one
    before it only copies the state it was given."""
    return ep.domain == "TERMINAL" and any(
        KIND_CATEGORY.get(t.kind) == "writing" and not t.fault for t in ep.turns[:k])


def tool_group(action: str) -> str:
    """The by-kind group of an MCP call: the tool that computes its answer (``add``,
    ``multiply``, ``count_words``, ``to_upper``; a catalogue may prefix their names), else
    ``records`` (create, get, list, update, delete, search, set and get by key)."""
    try:
        name = str(json.loads(action).get("tool", ""))
    except (ValueError, AttributeError):
        return "records"
    kind = computing_kind(name)
    return COMPUTING[kind][0] if kind else "records"
