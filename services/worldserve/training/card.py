"""The model card a checkpoint carries: what it simulates, how it was made, how well it does.

``README.md`` in the checkpoint directory, Hugging Face style: YAML front matter (machine
readable: ``worldserve.domains`` is what the gateway and the operator read through
``worldserve.domains.modelcard``) followed by prose. This module writes it after training.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from worldserve.domains.modelcard import CARD_FILE
from worldserve.modelserver.copying import CopyBias, to_mapping

DOMAINS = ["TERMINAL", "MCP"]
VERSION = "13"
# How the engine decodes this family of checkpoints (min_match and margin chosen on 184
# validation turns outside the reported held-out set: docs/MODEL.md, "Copy bias").
COPY_BIAS = CopyBias(min_match=3, margin=2.0)


def write(out: Path, training: dict[str, Any]) -> None:
    fidelity_path = out / "fidelity.json"
    fidelity = json.loads(fidelity_path.read_text()) if fidelity_path.exists() else {}
    meta = {
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "tags": ["world-model", "worldserve", "qwen3_moe"],
        "worldserve": {
            "name": "worldserve-tiny-moe",
            "version": VERSION,
            "domains": DOMAINS,
            "decoding": {"copy_bias": to_mapping(COPY_BIAS)},
            "data": "real executions: bash in a throw-away sandbox, a JSON-RPC tool server "
                    "over HTTP; faults provoked for real (worldserve.training.collect)",
            "training": training,
            "heldout": fidelity.get("overall", {}),
        },
    }
    lines = [
        "---", yaml.safe_dump(meta, sort_keys=False).rstrip(), "---", "",
        "# worldserve-tiny-moe", "",
        "The embedded default world model of worldserve: a small `Qwen3MoeForCausalLM` that "
        "predicts what a bash shell (TERMINAL) or an MCP tool server (MCP) answers to an agent's "
        "action. It serves only those domains; the gateway refuses sessions in any other.", "",
        "Trained on real executions with names and contents from a large vocabulary split, "
        "evaluated on episodes whose words are all outside the training split. Figures, the "
        "recipe and the commands that reproduce them: docs/MODEL.md in the worldserve "
        "repository.", "",
    ]
    if fidelity:
        lines += ["## Held-out fidelity", "", "```json",
                  json.dumps(fidelity.get("overall", {}), indent=2), "```", ""]
    (out / CARD_FILE).write_text("\n".join(lines))
