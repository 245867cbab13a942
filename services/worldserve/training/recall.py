"""A reasoning line that recalls what changed (pure): the earlier commands of the episode that
wrote, moved or removed what a Terminal command now reads.

The gateway's prompt keeps past turns as (action, observation) only, so a file written in turn
2 and read in turn 5 has its content in an earlier *action*, not in the initial state; most of
@8's misses on such turns copy the stale state. A stage trained with ``reasoning="recall"``
names those commands in its reasoning first, then answers. Tried in session 20 and not adopted:
the model learnt the line but then copied the newest write alone (docs/MODEL.md, "Not adopted:
reasoning that recalls the earlier writes").
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Protocol

from worldserve.training import arith
from worldserve.training.terminal import CATEGORIES, KIND_CATEGORY

LINES = "lines"  # written by the collector (terminal.NUMBERED_KINDS), not made from the turns
STYLES = ("plain", "recall", LINES, arith.ARITH)
WRITES = frozenset(CATEGORIES["writing"])
MOST = 4  # the reasoning names at most the last four changes
_OPERATORS = frozenset({"|", ">", ">>", "<", "&&", ";"})


class TurnLike(Protocol):
    action: str
    kind: str
    fault: str


def operands(action: str) -> set[str]:
    """The words of a command after its name that may name a path (options and shell
    operators left out; trailing slashes dropped)."""
    try:
        words = shlex.split(action, posix=True)
    except ValueError:  # an unbalanced quote: split on whitespace
        words = action.split()
    return {w.rstrip("/") for w in words[1:]
            if w and not w.startswith("-") and w not in _OPERATORS and w.rstrip("/")}


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def changes(before: Sequence[TurnLike], action: str, kind: str) -> list[str]:
    """The earlier writes (that really ran: no fault) this command's output depends on: every
    one for a listing, those naming one of its paths for any other read; the last ``MOST``."""
    writes = [t.action for t in before if t.kind in WRITES and not t.fault]
    if KIND_CATEGORY.get(kind) != "listing":
        mine = operands(action)
        writes = [w for w in writes if any(_related(p, n) for p in operands(w) for n in mine)]
    return writes[-MOST:]


def check_style(style: str) -> None:
    if style not in STYLES:
        raise ValueError(f"no reasoning style {style!r}; styles: {', '.join(STYLES)}")


def reasoning(style: str, domain: str, before: Sequence[TurnLike], turn: TurnLike,
              base: str) -> str:
    """The reasoning a turn is trained to give in ``style`` (``base``: the plain line)."""
    check_style(style)
    if style == arith.ARITH:  # a failing turn shows the failure, not the result
        return base if turn.fault else arith.reasoning(domain, turn.action, base)
    if style != "recall" or domain != "TERMINAL" or turn.kind in WRITES:
        return base
    found = changes(before, turn.action, turn.kind)
    if not found:
        return f"{base} Unchanged since the state."
    return f"{base} Changed since the state: {'; '.join(found)}."
