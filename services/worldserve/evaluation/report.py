"""Aggregate per-sample scores by domain and overall; Markdown and HTML reports (pure)."""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any

from worldserve.evaluation.judge import DIMENSIONS

RULES = ("format_valid", "exact_match", "token_f1", "rouge_l", "json_structure", "fault_visible")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{domain, domain/category or "overall": {n, metric: mean (0-1 rules; 0-100 judge)}};
    metrics that do not apply (json_structure on non-JSON references, fault_visible on turns
    without an injected fault, a judge that was not asked) are left out."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["domain"]].append(row)
        groups["overall"].append(row)
        if row.get("category"):  # held-out fixtures name the command or fault kind
            groups[f"{row['domain']}/{row['category']}"].append(row)
    out = {}
    for name, members in sorted(groups.items(), key=lambda kv: (kv[0] == "overall", kv[0])):
        summary: dict[str, Any] = {"n": len(members)}
        for metric in RULES:
            values = [float(m["scores"][metric]) for m in members
                      if m["scores"].get(metric) is not None]
            if values:
                summary[metric] = _mean(values)
        judged = [m["judge"] for m in members if m.get("judge")]
        if judged:
            for d in DIMENSIONS:
                summary[f"judge_{d}"] = _mean([j[d] for j in judged])
            summary["judge_overall"] = _mean([sum(j[d] for d in DIMENSIONS) / len(DIMENSIONS)
                                              for j in judged])
        out[name] = summary
    return out


def columns(summary: dict[str, dict[str, Any]]) -> list[str]:
    seen: list[str] = []
    for values in summary.values():
        for key in values:
            if key not in seen:
                seen.append(key)
    return seen


def cell(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key == "n":
        return str(value)
    return f"{value:.1f}" if key.startswith("judge") else f"{value:.3f}"


def markdown(title: str, summary: dict[str, dict[str, Any]]) -> str:
    cols = columns(summary)
    lines = [f"# {title}", "", "| domain | " + " | ".join(cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    for name, values in summary.items():
        lines.append(f"| {name} | " + " | ".join(cell(c, values.get(c)) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def to_html(title: str, summary: dict[str, dict[str, Any]]) -> str:
    cols = columns(summary)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["domain", *cols])
    body = "".join("<tr>" + f"<td>{html.escape(name)}</td>" + "".join(
        f"<td>{cell(c, values.get(c))}</td>" for c in cols) + "</tr>"
        for name, values in summary.items())
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title></head><body><h1>{html.escape(title)}</h1><table border='1'>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></body></html>\n")
