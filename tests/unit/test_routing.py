"""Version choice for new sessions (pure)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from worldserve.errors import NotFound
from worldserve.routing.choice import Entry, View, choose

VIEW = View(
    entries={"m@v1": Entry("m@v1", "m", "v1", "e1", weight=90),
             "m@v2": Entry("m@v2", "m", "v2", "e2", weight=10),
             "m@v0": Entry("m@v0", "m", "v0", "e0", weight=0, state="draining"),
             "n@a": Entry("n@a", "n", "a", "e3", weight=100)},
    aliases={"m:stable": "m@v1", "m:canary": "m@v2"})


def test_weights_split_new_sessions() -> None:
    rng = random.Random(1)
    picks = Counter(choose(VIEW, "m", "", rng) for _ in range(10_000))
    assert set(picks) == {"m@v1", "m@v2"}  # the draining version takes no new session
    assert 0.88 < picks["m@v1"] / 10_000 < 0.92


def test_pins_aliases_and_defaults() -> None:
    rng = random.Random(0)
    assert choose(VIEW, "m@v2", "", rng) == "m@v2"
    assert choose(VIEW, "m:canary", "", rng) == "m@v2"
    assert choose(VIEW, "stable", "m", rng) == "m@v1"
    assert choose(VIEW, "", "n", rng) == "n@a"
    with pytest.raises(NotFound, match="not served"):
        choose(VIEW, "m@v0", "", rng)  # draining: routable for pinned sessions, not for new
    with pytest.raises(NotFound, match="no canary"):
        choose(VIEW, "n:canary", "", rng)
    with pytest.raises(NotFound, match="served: m, n"):
        choose(VIEW, "zzz", "", rng)


def test_context_length_is_part_of_the_registry_entry() -> None:
    from worldserve.backends.checkpoint import load_context_tokens
    from worldserve.routing.choice import Entry
    from worldserve.settings import DEFAULT_MODEL_DIR

    entry = Entry("m@v1", "m", "v1", "http://m", max_model_len=262144)
    assert entry.to_dict()["max_model_len"] == 262144
    assert Entry.from_dict("m@v1", entry.to_dict()) == entry
    assert "max_model_len" not in Entry("m@v1", "m", "v1", "e").to_dict()  # unknown: left out
    assert load_context_tokens(DEFAULT_MODEL_DIR) == 4096  # the committed checkpoint
