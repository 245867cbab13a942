"""What a checkpoint says it simulates (pure): the ``worldserve`` block of its model card.

A checkpoint directory's ``README.md`` (Hugging Face model card) starts with YAML front matter;
its ``worldserve.domains`` lists the domains the model was trained and measured on. The gateway
refuses sessions in other domains and ``ListModels`` shows them; the operator copies them into
the registry entry. A checkpoint without a card (or without the block) declares nothing, and
every domain is served, as before cards existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from worldserve.domains.templates import Domain

CARD_FILE = "README.md"
ALL_DOMAINS: tuple[str, ...] = tuple(d.value for d in Domain)


@dataclass(frozen=True, slots=True)
class ModelCard:
    name: str = ""
    version: str = ""
    domains: tuple[str, ...] = ALL_DOMAINS
    # worldserve.decoding.copy_bias as written (the serving engine parses it:
    # worldserve.modelserver.copying); None = plain greedy decoding
    copy_bias: dict[str, object] | None = None


def parse(text: str) -> ModelCard:
    """The card of a README's front matter; ValueError when it is not valid."""
    if not text.startswith("---"):
        return ModelCard()
    try:
        _, front, _ = text.split("---", 2)
        meta = yaml.safe_load(front) or {}
    except (ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"model card front matter is not valid YAML: {exc}") from exc
    block = meta.get("worldserve") if isinstance(meta, dict) else None
    if not isinstance(block, dict):
        return ModelCard()
    decoding = block.get("decoding") or {}
    if not isinstance(decoding, dict):
        raise ValueError("worldserve.decoding must be a mapping")
    copy_bias = decoding.get("copy_bias")
    if copy_bias is not None and not isinstance(copy_bias, dict):
        raise ValueError("worldserve.decoding.copy_bias must be a mapping")
    return ModelCard(str(block.get("name", "")), str(block.get("version", "")),
                     normalize_domains(block.get("domains")), copy_bias)


def normalize_domains(raw: object) -> tuple[str, ...]:
    """Declared domains, upper-case and checked; none declared = all."""
    if not raw:
        return ALL_DOMAINS
    if not isinstance(raw, list | tuple):
        raise ValueError("domains must be a list of domain names")
    names = tuple(dict.fromkeys(str(d).upper() for d in raw))
    unknown = [d for d in names if d not in ALL_DOMAINS]
    if unknown:
        raise ValueError(f"unknown domain(s) {unknown}; known: {list(ALL_DOMAINS)}")
    return names


def read(model_dir: str | Path) -> ModelCard:
    """The card in ``model_dir`` (an empty card when there is none)."""
    path = Path(model_dir) / CARD_FILE
    if not path.is_file():
        return ModelCard()
    return parse(path.read_text(encoding="utf-8"))
