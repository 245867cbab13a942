"""Vocabularies for training episodes (pure): large enough that a model must copy, not recall.

Words come from the `english-words` package (web2 and GCIDE lists, ~250k entries) with a
syllable generator as a fallback. Every word is put in the ``train`` or ``heldout`` split by a
hash of the word itself, so the held-out evaluation only sees names and contents that no
training episode contained, whichever seed or machine built the data.
"""

from __future__ import annotations

import hashlib
import random
import string
from functools import lru_cache

SPLITS = ("train", "heldout")
_HELDOUT_PERCENT = 20
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]
_EXTS = [".txt", ".md", ".csv", ".log", ".json", ".py", ".cfg", ".ini", ".yaml", ".sh", ".dat",
         ".conf", ".html", ".tsv", ""]
_EXT_WEIGHTS = [10, 5, 4, 4, 3, 3, 1, 1, 2, 2, 1, 1, 1, 1, 2]


def split_of(word: str) -> str:
    """The split a word belongs to (stable across machines and seeds)."""
    digest = hashlib.sha1(word.encode()).digest()
    return "heldout" if digest[0] * 100 // 256 < _HELDOUT_PERCENT else "train"


def _source_words() -> list[str]:
    try:
        from english_words import get_english_words_set
    except ImportError:  # the syllable generator still gives tens of thousands of words
        rng = random.Random(0)
        return sorted({"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
                       for _ in range(60000)})
    words = get_english_words_set(["web2", "gcide"], lower=True, alpha=True)
    return sorted(w for w in words if 3 <= len(w) <= 10 and w.isascii())


@lru_cache(maxsize=2)
def words(split: str) -> tuple[str, ...]:
    """Every word of ``split`` ("train" or "heldout"), sorted."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}")
    return tuple(w for w in _source_words() if split_of(w) == split)


class Vocab:
    """Random names, words, identifiers and numbers drawn from one split."""

    def __init__(self, rng: random.Random, split: str = "train") -> None:
        self.rng = rng
        self.split = split
        self._words = words(split)

    def word(self) -> str:
        r = self.rng.random()
        w = self.rng.choice(self._words)
        if r < 0.06:
            return w.capitalize()
        if r < 0.09:
            return w.upper()
        return w

    def ident(self) -> str:
        """A random identifier: ``k3x9q``, ``build_2024``, ``Node7`` …"""
        r = self.rng
        kind = r.random()
        if kind < 0.4:
            return "".join(r.choice(string.ascii_lowercase + string.digits)
                           for _ in range(r.randint(3, 7)))
        if kind < 0.7:
            first = r.choice(self._words)
            second = r.choice(self._words) if r.random() < 0.5 else r.randint(1, 2099)
            return f"{first}_{second}"
        return f"{r.choice(self._words)}{r.randint(0, 99)}"

    def number(self) -> str:
        r = self.rng.random()
        if r < 0.5:
            return str(self.rng.randint(0, 99))
        if r < 0.8:
            return str(self.rng.randint(100, 9999))
        return f"{self.rng.randint(0, 999)}.{self.rng.randint(0, 99):02d}"

    def token(self) -> str:
        """One word of file content."""
        r = self.rng.random()
        if r < 0.72:
            return self.word()
        if r < 0.87:
            return self.number()
        return self.ident()

    def line(self, lo: int = 1, hi: int = 5) -> str:
        return " ".join(self.token() for _ in range(self.rng.randint(lo, hi)))

    def stem(self) -> str:
        return self.rng.choice(self._words) if self.rng.random() < 0.65 else self.ident()

    def file_name(self) -> str:
        ext = self.rng.choices(_EXTS, weights=_EXT_WEIGHTS)[0]
        return self.stem() + (ext or ".txt" if self.rng.random() < 0.5 else ext)

    def dir_name(self) -> str:
        return self.stem()
