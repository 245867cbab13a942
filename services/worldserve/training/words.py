"""Vocabularies for training episodes (pure): large enough that a model must copy, not recall.

Words come from the `english-words` package (web2 and GCIDE lists, ~250k entries) with a
syllable generator as a fallback. Every word is put in the ``train`` or ``heldout`` split by a
hash of the word itself, so the held-out evaluation only sees names and contents that no
training episode contained, whichever seed or machine built the data.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
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


_PIECE = re.compile(r"[A-Za-z]{2,}")
_PIECE_COUNTS = (1, 1, 2, 2, 2, 3)  # how many pieces a piece word joins, drawn uniformly


def pieces(tokens: Iterable[str]) -> tuple[str, ...]:
    """The tokens of a tokenizer's vocabulary that are words of two letters or more, sorted:
    the pieces ``Vocab`` joins into piece words (byte-level BPE spells ASCII letters as
    themselves; whitespace is a token of its own, so no word token carries a space)."""
    return tuple(sorted({t for t in tokens if _PIECE.fullmatch(t)}))


def rare_weights(pieces: Sequence[str], tokenized: Iterable[Sequence[str]]) -> tuple[float, ...]:
    """A weight per piece, ``1 / sqrt(1 + n)`` where ``n`` is how often the piece occurs in
    ``tokenized`` (the list words as the tokenizer splits them; session 29): a piece the drawn
    words already carry often (``ing``: 2,226 of the training words) is drawn as a piece
    rarely, one they almost never carry (``todo``, ``error``: 2; ``json``: 0) often."""
    counts = Counter(t for tokens in tokenized for t in tokens)
    return tuple(1.0 / math.sqrt(1 + counts[p]) for p in pieces)


class Vocab:
    """Random names, words, identifiers and numbers drawn from one split.

    ``pieces`` and ``piece_share`` (session 28): a word or name is, with that probability, a
    *piece word* instead of a word of the list: one to three tokens of the tokenizer's
    vocabulary joined (``pieces``; ``todo`` + ``ing``). Drawn words leave many tokens unseen as
    content (``todo`` never, ``error`` only as a JSON key), and a model does not copy a token
    it has never copied. A piece word is in the split its own hash puts it in, like any word
    (drawn again until it is): a held-out set with piece words holds none a training set
    does.

    ``piece_weights`` (session 29; ``rare_weights``): how often each piece is drawn, one weight
    per piece; none: every piece as often."""

    def __init__(self, rng: random.Random, split: str = "train", pieces: Sequence[str] = (),
                 piece_share: float = 0.0, piece_weights: Sequence[float] = ()) -> None:
        if piece_share and not pieces:
            raise ValueError("a piece share needs pieces to join")
        if piece_weights and (len(piece_weights) != len(pieces)
                              or min(piece_weights) < 0 or not sum(piece_weights)):
            raise ValueError(f"{len(piece_weights)} piece weights for {len(pieces)} pieces: "
                             "one non-negative weight per piece, not all 0")
        self.rng = rng
        self.split = split
        self._words = words(split)
        self._pieces = pieces
        self._piece_share = piece_share
        self._cum_weights = list(itertools.accumulate(piece_weights)) or None

    def _piece(self) -> str:
        if self._cum_weights is None:
            return self.rng.choice(self._pieces)
        return self.rng.choices(self._pieces, cum_weights=self._cum_weights)[0]

    def _pick(self) -> str:
        """A word of the list, or (``piece_share`` of the time) a piece word; with no share,
        exactly one draw of the rng, as before pieces existed (data seeds reproduce)."""
        if self._piece_share and self.rng.random() < self._piece_share:
            while True:
                w = "".join(self._piece() for _ in range(self.rng.choice(_PIECE_COUNTS)))
                if len(w) <= 16 and split_of(w) == self.split:
                    return w
        return self.rng.choice(self._words)

    def word(self) -> str:
        r = self.rng.random()
        w = self._pick()
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
            first = self._pick()
            second = self._pick() if r.random() < 0.5 else r.randint(1, 2099)
            return f"{first}_{second}"
        return f"{self._pick()}{r.randint(0, 99)}"

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
        return self._pick() if self.rng.random() < 0.65 else self.ident()

    def file_name(self) -> str:
        ext = self.rng.choices(_EXTS, weights=_EXT_WEIGHTS)[0]
        return self.stem() + (ext or ".txt" if self.rng.random() < 0.5 else ext)

    def dir_name(self) -> str:
        return self.stem()
