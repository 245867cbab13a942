"""Build the project's AgentWorldBench-format fixture from the default model's held-out episodes.

    python -m worldserve.training.fixture [--per-domain 0]

Reads ``models/worldserve-tiny-moe/data/heldout_episodes.jsonl`` (real bash / real tool server
observations with names and words from the held-out vocabulary split, collected by
``make train``) and writes ``…/data/agentworldbench/<domain>_test.jsonl``: one record per turn,
whose ``worldserve`` block names the report group (command kind or fault) and the injected
fault, so ``worldserve eval`` reports per group and injects the same fault again.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from worldserve.domains.rendering import PastTurn, action_prompts
from worldserve.domains.templates import Domain, system_prompt
from worldserve.settings import DEFAULT_MODEL_DIR
from worldserve.training.categories import category_of
from worldserve.training.collect import Episode


def records(ep: Episode) -> list[dict[str, Any]]:
    prompts = action_prompts(ep.task, ep.initial_state,
                             [PastTurn(t.action, t.observation) for t in ep.turns])
    domain = ep.domain.lower()
    out = []
    for n, turn in enumerate(ep.turns, start=1):
        out.append({
            "task": domain, "id": f"{domain}-{ep.index}-{n}", "prompt": prompts[:n],
            "response": [t.observation for t in ep.turns[:n]], "current_prompt": prompts[n - 1],
            "system_str": system_prompt(Domain(ep.domain)), "turn_idx": n,
            "total_turns": len(ep.turns),
            "worldserve": {"category": category_of(ep, n - 1),
                           "turn": {"fault_kind": turn.fault, "untruncated": turn.normal}},
        })
    return out


def build(source: Path, out_dir: Path, per_domain: int = 0) -> dict[str, int]:
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for line in source.read_text().splitlines():
        ep = Episode.from_json(line)
        chosen = by_domain.setdefault(ep.domain.lower(), [])
        if not per_domain or len(chosen) < per_domain:
            chosen.extend(records(ep))
    out_dir.mkdir(parents=True, exist_ok=True)
    for domain, recs in by_domain.items():
        (out_dir / f"{domain}_test.jsonl").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    return {d: len(r) for d, r in by_domain.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-domain", type=int, default=0,
                        help="episodes per domain (0 = all held-out episodes)")
    args = parser.parse_args()
    data = DEFAULT_MODEL_DIR / "data"
    print(build(data / "heldout_episodes.jsonl", data / "agentworldbench", args.per_domain))


if __name__ == "__main__":
    main()
