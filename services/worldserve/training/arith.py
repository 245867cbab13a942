"""Written-out arithmetic for the reasoning of a turn that computes (pure): column by column,
as on paper, so that a small model does one digit fact at a time instead of a whole sum.

@11 copies well and computes badly: on the four evaluation sets it is right on 3 of 116
fault-free turns that add, subtract or multiply two integers (`python3 -c "print(98*62)"`, MCP
`multiply`), and a stage that only drew these kinds more often (session 22) taught a few sums
and no products. Small transformers learn multi-digit arithmetic when each step is written out
(a "scratchpad"), because every written digit then hangs on two or three digits just before
it. A stage trained with ``reasoning="arith"`` (recall.STYLES) gives such turns' answers this
reasoning; every other turn keeps its own. Tried in session 31 and not adopted: the model
learnt the form and not the one-digit facts (addition steps right 28 %, products 6 %; no
computing turn right), and lost 26 turns elsewhere (docs/MODEL.md, "Not adopted: sums and
products worked out column by column"). ``working_report`` counts that in a predictions file.

The forms, digits right to left, each step ``digit op digit (op carry) = result``:

- ``78+84``: ``8+4+0=12, 7+8+1=16, carry 1. So 162.``
- ``86-67``: ``6-7-0<0: 16-7-0=9, 8-6-1=1. So 19.`` (a borrow where a column goes below 0);
  ``13-92``: ``13<92, so -(92-13). 2-3-0<0: 12-3-0=9, 9-1-1=7. So -79.``
- ``98*62``: ``98*2: 8*2+0=16, 9*2+1=19. So 196. 98*6: 8*6+0=48, 9*6+4=58. So 588.
  196+5880: 6+0+0=6, 9+8+0=17, 1+8+1=10, 0+5+1=6. So 6076.``
"""

from __future__ import annotations

import json
import re

from worldserve.training.mcp_tools import COMPUTING, computing_kind

ARITH = "arith"  # the reasoning style (recall.STYLES)
# The Terminal command kinds whose answer this computes, and MCP's computing tools.
TERMINAL_KINDS = ("python_arith", "shell_arith", "expr")
_TERMINAL = (re.compile(r'python3 -c "print\((\d+)([-+*])(\d+)\)"'),
             re.compile(r"echo \$\(\((\d+) ([-+*]) (\d+)\)\)"),
             re.compile(r"expr (\d+) (\+|-|\\\*) (\d+)"))
_MCP = {"add": "+", "multiply": "*"}  # mcp_tools.COMPUTING kinds, and what they compute


def _digits(n: int, width: int) -> list[int]:
    """The digits of ``n``, ones first, padded with zeros to ``width``."""
    return [int(c) for c in reversed(str(n).zfill(width))]


def _number(columns: list[int], carry: int) -> int:
    """The number whose digits, ones first, are ``columns`` with ``carry`` on top."""
    return int("".join(str(d) for d in reversed([*columns, carry])))


def add(a: int, b: int) -> tuple[str, int]:
    """The written sum of two non-negative integers, and the sum."""
    width = max(len(str(a)), len(str(b)))
    steps, out, carry = [], [], 0
    for x, y in zip(_digits(a, width), _digits(b, width), strict=True):
        s = x + y + carry
        steps.append(f"{x}+{y}+{carry}={s}")
        out.append(s % 10)
        carry = s // 10
    tail = f", carry {carry}" if carry else ""
    return f"{', '.join(steps)}{tail}.", _number(out, carry)


def subtract(a: int, b: int) -> tuple[str, int]:
    """The written difference of two non-negative integers (a negative one as ``-(b-a)``)."""
    if a < b:
        text, value = subtract(b, a)
        return f"{a}<{b}, so -({b}-{a}). {text}", -value
    width = len(str(a))
    steps, out, borrow = [], [], 0
    for x, y in zip(_digits(a, width), _digits(b, width), strict=True):
        if x - y - borrow < 0:
            steps.append(f"{x}-{y}-{borrow}<0: {x + 10}-{y}-{borrow}={x + 10 - y - borrow}")
            out.append(x + 10 - y - borrow)
            borrow = 1
        else:
            steps.append(f"{x}-{y}-{borrow}={x - y - borrow}")
            out.append(x - y - borrow)
            borrow = 0
    return f"{', '.join(steps)}.", _number(out, 0)


def _times_digit(a: int, d: int) -> tuple[str, int]:
    steps, out, carry = [], [], 0
    for x in _digits(a, len(str(a))):
        s = x * d + carry
        steps.append(f"{x}*{d}+{carry}={s}")
        out.append(s % 10)
        carry = s // 10
    value = _number(out, carry)
    return f"{a}*{d}: {', '.join(steps)}. So {value}.", value


def multiply(a: int, b: int) -> tuple[str, int]:
    """The written product of two non-negative integers: ``a`` times each digit of ``b``
    (ones first), then the shifted partial products added up one by one."""
    parts, total = [], 0
    for place, d in enumerate(_digits(b, len(str(b)))):
        text, value = _times_digit(a, d)
        parts.append(text)
        shifted = value * 10 ** place
        if place:
            sum_text, total_after = add(total, shifted)
            parts.append(f"{total}+{shifted}: {sum_text} So {total_after}.")
            total = total_after
        else:
            total = shifted
    return " ".join(parts), total


_OPS = {"+": add, "-": subtract, "*": multiply, "\\*": multiply}


def scratchpad(a: int, op: str, b: int) -> str:
    """The reasoning that works ``a op b`` out; ends on the result (``So N.``)."""
    text, value = _OPS[op](a, b)
    if op in ("*", "\\*"):
        return text  # ends on the last "So N."
    return f"{text} So {value}."


def operation(domain: str, action: str) -> tuple[int, str, int] | None:
    """(a, op, b) where ``action`` computes one of ``+ - *`` on two non-negative integers;
    None for anything else (division, a string, an argument of the wrong type)."""
    if domain == "TERMINAL":
        for pattern in _TERMINAL:
            m = pattern.fullmatch(action.strip())
            if m:
                return int(m.group(1)), m.group(2).replace("\\", ""), int(m.group(3))
        return None
    if domain == "MCP":
        try:
            call = json.loads(action)
            name, args = str(call["tool"]), call["arguments"]
        except (ValueError, KeyError, TypeError):
            return None
        kind = computing_kind(name)
        if kind not in _MCP or not isinstance(args, dict):
            return None
        x, y = (p for p, _ in COMPUTING[kind][1])
        a, b = args.get(x), args.get(y)
        if type(a) is int and type(b) is int and a >= 0 and b >= 0 and set(args) == {x, y}:
            return a, _MCP[kind], b
        return None
    return None


def reasoning(domain: str, action: str, base: str) -> str:
    """``base`` with the working of the computation ``action`` asks for, where it asks for one."""
    found = operation(domain, action)
    if found is None:
        return base
    return f"{base} {scratchpad(*found)}"


_STEPS = {"addition": (re.compile(r"(?<![\d*])(\d)\+(\d)\+(\d)=(\d+)"), lambda x, y, c: x + y + c),
          "multiplication": (re.compile(r"(\d)\*(\d)\+(\d)=(\d+)"), lambda x, y, c: x * y + c),
          "subtraction": (re.compile(r"(\d+)-(\d)-(\d)=(-?\d+)"), lambda x, y, c: x - y - c)}


def working_report(rows: list[dict[str, str]]) -> dict[str, int]:
    """How the written working of the fault-free computing turns among ``rows`` (the
    prediction rows ``heldout --predictions`` writes: domain, category, action, reference,
    predicted, raw) went: how many wrote one, were right from end to end, were exact; and the
    column steps of each kind written, and right."""
    out = {"turns": 0, "written": 0, "working right": 0, "exact": 0}
    for kind in _STEPS:
        out[f"{kind} steps"] = out[f"{kind} steps right"] = 0
    for r in rows:
        found = operation(r["domain"], r["action"])
        if found is None or r["category"].startswith("fault:"):
            continue
        think = r["raw"].partition("</think>")[0]
        out["turns"] += 1
        out["written"] += "So " in think
        out["working right"] += scratchpad(*found) in think
        out["exact"] += r["predicted"].strip() == r["reference"].strip()
        for kind, (pattern, value) in _STEPS.items():
            for m in pattern.finditer(think):
                x, y, c, s = map(int, m.groups())
                out[f"{kind} steps"] += 1
                out[f"{kind} steps right"] += value(x, y, c) == s
    return out


def main() -> None:
    """``python -m worldserve.training.arith PREDICTIONS...``: ``working_report`` of each file
    and of all together, as JSON lines."""
    import sys

    every: list[dict[str, str]] = []
    for name in sys.argv[1:]:
        with open(name) as fh:
            rows = [json.loads(line) for line in fh]
        every += rows
        print(json.dumps({"file": name, **working_report(rows)}))
    if len(sys.argv) > 2:
        print(json.dumps({"file": "all", **working_report(every)}))


if __name__ == "__main__":
    main()
