"""Build the project's AgentWorldBench-format fixture from its own held-out real trajectories.

    python -m worldserve.evaluation.fixture [--per-domain 20]

Reads ``models/worldserve-tiny-moe/data/heldout.jsonl`` (real bash / real tool observations,
collected by ``make train``) and writes ``…/data/agentworldbench/<domain>_test.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from worldserve.settings import DEFAULT_MODEL_DIR

_OBS = re.compile(r"<predicted_observation>\n?(.*?)\n?</predicted_observation>", re.DOTALL)


def to_record(sample: dict[str, Any]) -> dict[str, Any]:
    messages = sample["messages"]
    users = [m["content"] for m in messages if m["role"] == "user"]
    assistants = [m["content"] for m in messages if m["role"] == "assistant"]
    observations = []
    for text in assistants:
        match = _OBS.search(text)
        observations.append(match.group(1) if match else text)
    domain = sample["domain"].lower()
    return {"task": domain, "id": f"{domain}-{sample['episode']}-{sample['turn']}",
            "prompt": users, "response": [*observations, sample["observation"]],
            "current_prompt": users[-1], "system_str": messages[0]["content"],
            "turn_idx": len(users), "total_turns": len(users)}


def build(source: Path, out_dir: Path, per_domain: int) -> dict[str, int]:
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for line in source.read_text().splitlines():
        sample = json.loads(line)
        chosen = by_domain.setdefault(sample["domain"].lower(), [])
        if len(chosen) < per_domain:
            chosen.append(to_record(sample))
    out_dir.mkdir(parents=True, exist_ok=True)
    for domain, records in by_domain.items():
        (out_dir / f"{domain}_test.jsonl").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return {d: len(r) for d, r in by_domain.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-domain", type=int, default=20)
    args = parser.parse_args()
    data = DEFAULT_MODEL_DIR / "data"
    print(build(data / "heldout.jsonl", data / "agentworldbench", args.per_domain))


if __name__ == "__main__":
    main()
