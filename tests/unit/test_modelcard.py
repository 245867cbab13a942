from __future__ import annotations

from pathlib import Path

import pytest

from worldserve.domains import modelcard
from worldserve.routing.choice import Entry
from worldserve.settings import DEFAULT_MODEL_DIR, DEFAULT_MODEL_VERSION, Settings


def test_a_card_declares_its_domains() -> None:
    card = modelcard.parse("---\nworldserve:\n  name: tiny\n  version: '2'\n"
                           "  domains: [terminal, MCP, TERMINAL]\n---\n# tiny\n")
    assert card == modelcard.ModelCard("tiny", "2", ("TERMINAL", "MCP"))


@pytest.mark.parametrize("text", ["# no front matter", "---\nlicense: mit\n---\n",
                                  "---\nworldserve: {name: x}\n---\n"])
def test_no_declaration_means_every_domain(text: str) -> None:
    assert modelcard.parse(text).domains == modelcard.ALL_DOMAINS


@pytest.mark.parametrize("text, problem", [
    ("---\nworldserve: {domains: [CHESS]}\n---\n", "unknown domain"),
    ("---\nworldserve: {domains: TERMINAL}\n---\n", "list"),
    ("---\n: : [\n---\n", "YAML"),
])
def test_bad_cards_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        modelcard.parse(text)


def test_missing_card_file(tmp_path: Path) -> None:
    assert modelcard.read(tmp_path) == modelcard.ModelCard()


def test_the_committed_default_model_serves_terminal_and_mcp_only() -> None:
    card = modelcard.read(DEFAULT_MODEL_DIR)
    assert card.domains == ("TERMINAL", "MCP")
    assert card.name == "worldserve-tiny-moe" and card.version


def test_the_default_version_label_is_the_committed_cards_name_and_version() -> None:
    card = modelcard.read(DEFAULT_MODEL_DIR)
    assert f"{card.name}@{card.version}" == DEFAULT_MODEL_VERSION
    assert Settings.model_fields["model_version_label"].default == DEFAULT_MODEL_VERSION


def test_registry_entries_carry_domains() -> None:
    base = {"model": "m", "version": "1", "endpoint": "h:1"}
    assert Entry.from_dict("m@1", base).domains == modelcard.ALL_DOMAINS
    assert Entry.from_dict("m@1", {**base, "domains": ["mcp"]}).domains == ("MCP",)


def test_the_committed_checkpoint_stays_within_60_mb() -> None:
    """Issue 17's limit, for the checkpoint with its evaluation data (docs/MODEL.md)."""
    size = sum(p.stat().st_size for p in Path(DEFAULT_MODEL_DIR).rglob("*") if p.is_file())
    assert size <= 60 * 1000 * 1000
