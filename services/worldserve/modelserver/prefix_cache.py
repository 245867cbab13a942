"""An LRU of KV caches keyed by token sequences, bounded in bytes (pure: no torch, no I/O).

The engine stores the KV of every prompt it prefills and of every finished sequence (prompt +
generated tokens). A new prompt looks up the entry sharing its longest token prefix, so a
session's turn N prefills only what turn N-1 did not already cover: the previous observation and
the new action. Forks and samples of the same state share their parent's entry the same way.
Entries are opaque to this module (the engine's per-layer tensors); it only needs their size.

An entry may also carry *marks*: a payload at a position (the engine keeps the next-token logits
at the end of each prompt it prefilled). A prompt that an entry covers exactly up to a mark needs
no prefill at all — and gets the very logits of the first computation, so repeating a prompt
(a replay, a retry, a reset with the same seed) repeats its answer bit for bit instead of
depending on how a prefill was split. Marks follow an entry into the longer one that replaces it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import numpy as np


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two 1-d token arrays."""
    m = min(len(a), len(b))
    if m == 0:
        return 0
    differ = np.flatnonzero(a[:m] != b[:m])
    return int(differ[0]) if len(differ) else m


@dataclass(slots=True)
class _Entry:
    tokens: np.ndarray
    value: Any
    nbytes: int  # of the value and the marks
    marks: dict[int, tuple[Any, int]] = field(default_factory=dict)  # position -> (payload, bytes)


@dataclass(slots=True)
class CacheStats:
    lookups: int = 0
    hits: int = 0
    lookup_tokens: int = 0  # tokens of every looked-up prompt
    reused_tokens: int = 0  # of which came from the cache
    stored: int = 0
    evicted: int = 0
    superseded: int = 0  # entries dropped because a longer entry extends them
    too_large: int = 0  # entries refused because one alone exceeds the bound


class PrefixCache:
    """Longest-prefix lookup over at most ``max_bytes`` of cached values, least recently used out."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._ids = count()
        self.nbytes = 0
        self.stats = CacheStats()

    def __len__(self) -> int:
        return len(self._entries)

    def match(self, tokens: Sequence[int], limit: int | None = None) -> tuple[int, Any]:
        """(n, value): the entry sharing the longest prefix with ``tokens`` and that length.

        ``limit`` caps n (the engine must always prefill at least one token to get logits).
        Returns (0, None) on a miss. A hit becomes the most recently used entry.
        """
        want = np.asarray(tokens, dtype=np.int64)
        cap = len(want) if limit is None else max(0, min(limit, len(want)))
        best_id, best_n = -1, 0
        for entry_id, entry in self._entries.items():
            n = min(common_prefix(entry.tokens, want), cap)
            if n > best_n or (n == best_n and n > 0):  # ties: the most recent one wins
                best_id, best_n = entry_id, n
        self.stats.lookups += 1
        self.stats.lookup_tokens += len(want)
        if best_n == 0:
            return 0, None
        self._entries.move_to_end(best_id)
        self.stats.hits += 1
        self.stats.reused_tokens += best_n
        return best_n, self._entries[best_id].value

    def marked(self, tokens: Sequence[int]) -> tuple[Any, Any] | None:
        """(value, payload) of an entry that covers ``tokens`` exactly up to a mark at their end;
        None otherwise. A hit reuses every token and becomes the most recently used entry."""
        want = np.asarray(tokens, dtype=np.int64)
        for entry_id, entry in reversed(self._entries.items()):
            mark = entry.marks.get(len(want))
            if mark is not None and common_prefix(entry.tokens, want) == len(want):
                self._entries.move_to_end(entry_id)
                self.stats.lookups += 1
                self.stats.hits += 1
                self.stats.lookup_tokens += len(want)
                self.stats.reused_tokens += len(want)
                return entry.value, mark[0]
        return None

    def put(self, tokens: Sequence[int], value: Any, nbytes: int,
            mark: tuple[Any, int] | None = None) -> bool:
        """Store ``value`` for ``tokens`` (and ``mark`` = (payload, bytes) at their end); entries
        that are a prefix of them are dropped (the new one covers them, their marks move to it),
        and nothing but the mark is stored when an entry already extends them. Evicts least
        recently used entries to stay within the bound. Returns whether an entry was stored."""
        if nbytes > self.max_bytes:
            self.stats.too_large += 1
            return False
        new = np.asarray(tokens, dtype=np.int64)
        marks = {len(new): mark} if mark is not None else {}
        for entry_id, entry in self._entries.items():
            if len(entry.tokens) >= len(new) and common_prefix(entry.tokens, new) == len(new):
                self._entries.move_to_end(entry_id)
                if mark is not None and len(new) not in entry.marks:
                    entry.marks[len(new)] = mark
                    entry.nbytes += mark[1]
                    self.nbytes += mark[1]
                    self._evict()
                return False
        for entry_id, entry in list(self._entries.items()):
            if len(entry.tokens) <= len(new) and common_prefix(entry.tokens, new) == len(
                    entry.tokens):
                marks = {**entry.marks, **marks}
                self._drop(entry_id)
                self.stats.superseded += 1
        total = nbytes + sum(b for _, b in marks.values())
        if total > self.max_bytes:
            self.stats.too_large += 1
            return False
        self._entries[next(self._ids)] = _Entry(new, value, total, marks)
        self.nbytes += total
        self.stats.stored += 1
        self._evict()
        return True

    def _evict(self) -> None:
        while self.nbytes > self.max_bytes and self._entries:
            self._drop(next(iter(self._entries)))
            self.stats.evicted += 1

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def _drop(self, entry_id: int) -> None:
        self.nbytes -= self._entries.pop(entry_id).nbytes
