"""The prefix cache's lookup, supersession and byte-bounded LRU (pure logic)."""

from __future__ import annotations

import numpy as np
import pytest

from worldserve.modelserver.prefix_cache import PrefixCache, common_prefix


def test_common_prefix() -> None:
    a = np.array([1, 2, 3, 4])
    assert common_prefix(a, np.array([1, 2, 3, 4, 5])) == 4
    assert common_prefix(a, np.array([1, 2, 9])) == 2
    assert common_prefix(a, np.array([9])) == 0
    assert common_prefix(a, np.array([], dtype=np.int64)) == 0


def test_longest_prefix_wins_and_limit_caps_it() -> None:
    cache = PrefixCache(1000)
    cache.put([1, 2], "short", 10)
    cache.put([7, 8, 9], "other", 10)
    cache.put([1, 2, 3, 4, 5], "long", 10)  # supersedes [1, 2]
    assert len(cache) == 2
    assert cache.match([1, 2, 3, 4, 5, 6]) == (5, "long")
    assert cache.match([1, 2, 3, 4, 5], limit=4) == (4, "long")  # keep a token to prefill
    assert cache.match([1, 2, 3, 9]) == (3, "long")  # a partial prefix is reused too
    assert cache.match([5, 5]) == (0, None)
    assert (cache.stats.lookups, cache.stats.hits, cache.stats.reused_tokens) == (4, 3, 12)


def test_an_entry_covered_by_a_longer_one_is_not_stored() -> None:
    cache = PrefixCache(1000)
    assert cache.put([1, 2, 3], "full", 10)
    assert not cache.put([1, 2], "part", 10)
    assert len(cache) == 1 and cache.nbytes == 10


def test_least_recently_used_entries_go_first_within_the_bound() -> None:
    cache = PrefixCache(30)
    cache.put([1], "a", 10)
    cache.put([2], "b", 10)
    cache.put([3], "c", 10)
    cache.match([1, 0])  # "a" is now the most recent
    cache.put([4], "d", 10)
    assert cache.nbytes == 30 and cache.stats.evicted == 1
    assert cache.match([2]) == (0, None)  # "b" was the least recently used
    assert cache.match([1])[1] == "a"
    assert not cache.put([5], "huge", 31)  # larger than the whole bound: refused
    assert cache.stats.too_large == 1


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError):
        PrefixCache(-1)


def test_marks_give_back_a_prompt_exactly_and_follow_the_longer_entry() -> None:
    cache = PrefixCache(1000)
    cache.put([1, 2, 3], "kv-prompt", 10, mark=("logits-after-3", 5))
    assert cache.marked([1, 2, 3]) == ("kv-prompt", "logits-after-3")
    assert cache.marked([1, 2]) is None and cache.marked([1, 2, 3, 4]) is None
    cache.put([1, 2, 3, 4, 5], "kv-finished", 20)  # supersedes the prompt entry, keeps its mark
    assert len(cache) == 1 and cache.nbytes == 25
    assert cache.marked([1, 2, 3]) == ("kv-finished", "logits-after-3")
    assert not cache.put([1, 2, 3, 4], "kv-other", 8, mark=("logits-after-4", 5))  # covered:
    assert cache.marked([1, 2, 3, 4]) == ("kv-finished", "logits-after-4")  # only the mark added
    assert cache.nbytes == 30
