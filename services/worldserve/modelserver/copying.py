"""Copy bias: greedy decoding that prefers continuing a span of the prompt (pure logic).

A world model's observation is mostly copied from its prompt (a file's lines, a listing, an
earlier turn's output). A small model copies well but not reliably: one token goes astray
mid-copy (``placooth`` for ``placoderm``, a tag in the middle of a name) and the rest of the
answer follows the wrong turn. Copy bias looks up the longest suffix of the observation
generated so far that occurs *in the prompt*, at least ``min_match`` tokens long; the tokens
that followed it there are the copy candidates. When the model's own greedy choice is not a
candidate but its best candidate is within ``margin`` nats of that choice, the candidate is
taken instead. Two decisions stay the model's own: how an observation starts (content, an
error, nothing: the match never reaches back over the opening tag, because the starts of
earlier observations in the prompt are no evidence for this one's) and where it stops (its
closing tag, or end of text, is never overridden). Outside the observation (the reasoning)
nothing changes, and a turn that asks for a truncated output decodes plain greedy (``applies``).

With ``items`` on, where no exact suffix recurs, the match may also skip separators (spaces,
commas, line breaks, ``./``): a state that lists ``a.sh, b.log`` then offers ``b`` after an
answer's ``a.sh`` and a line break, which an exact match cannot (``item_candidates``). That
reaches listings, ``find``, and words put one to a line, at the start of each item only.

The model card declares it (``worldserve.decoding.copy_bias``, docs/MODEL.md): the serving
engine applies it to greedy rows, the held-out evaluation measures with it, and a server that
does not know it (vLLM) decodes plain greedy from the same weights.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from worldserve.domains.faults import instruction_tag
from worldserve.domains.rendering import OBS_CLOSE, OBS_OPEN


@dataclass(frozen=True, slots=True)
class CopyBias:
    min_match: int = 3  # tokens of suffix that must recur in the prompt
    margin: float = 2.0  # nats below the greedy choice a copy candidate may be
    max_match: int = 32  # longest suffix looked for (a longer one is just as good a match)
    items: bool = False  # where no exact suffix recurs, also match across separators (below)

    def __post_init__(self) -> None:
        if self.min_match < 1 or self.max_match < self.min_match:
            raise ValueError("copy bias needs 1 <= min_match <= max_match")
        if not self.margin >= 0:
            raise ValueError("copy bias margin must be >= 0")


def from_mapping(raw: Mapping[str, object] | None) -> CopyBias | None:
    """The card's ``copy_bias`` block; None (no block) means plain greedy decoding."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError("copy_bias must be a mapping")
    unknown = set(raw) - {"min_match", "margin", "max_match", "items"}
    if unknown:
        raise ValueError(f"copy_bias: unknown field(s) {sorted(unknown)}")
    default = CopyBias()
    items = raw.get("items", default.items)
    if not isinstance(items, bool):
        raise ValueError("copy_bias: items must be true or false")
    return CopyBias(int(str(raw.get("min_match", default.min_match))),
                    float(str(raw.get("margin", default.margin))),
                    int(str(raw.get("max_match", default.max_match))), items)


def to_mapping(bias: CopyBias) -> dict[str, object]:
    out: dict[str, object] = {"min_match": bias.min_match, "margin": bias.margin,
                              "max_match": bias.max_match}
    if bias.items:  # absent from a card that predates it, and from one that leaves it off
        out["items"] = True
    return out


def applies(prompt: str) -> bool:
    """Whether copy bias decodes this prompt's answer at all: not where the prompt asks for a
    truncated output. There the answer is a copy cut short, and where it is cut is the model's
    decision: a copy candidate would carry the copy on past the cut (``...\nz`` became the
    whole file on two held-out turns of @9, and the fault no longer showed)."""
    return instruction_tag("truncated_output") not in prompt


def candidates(prompt: np.ndarray, tail: Sequence[int], bias: CopyBias) -> np.ndarray:
    """Tokens that followed, in ``prompt``, the longest suffix of ``tail`` found there.

    ``tail`` is what the match may use (the observation generated so far; its last
    ``max_match`` tokens are enough): no suffix reaches further back. Empty when no suffix of at
    least ``min_match`` tokens occurs with a token after it."""
    ends = _match_ends(prompt, tail, bias)
    return np.unique(prompt[ends + 1]) if ends.size else np.empty(0, dtype=prompt.dtype)


def item_candidates(prompt: np.ndarray, tail: Sequence[int], bias: CopyBias,
                    separators: Collection[int]) -> np.ndarray:
    """Copy candidates across layouts: the first token of the item that followed, in
    ``prompt``, the items ``tail`` ends with, where separators (spaces, commas, line breaks,
    ``./``) do not count. A state lists ``a.sh, b.log`` and ``ls`` prints ``a.sh`` on a line of
    its own: no exact suffix of ``a.sh\n`` recurs, but after it comes ``b``. Only at an item's
    boundary: ``tail`` must end in a separator, and the match must have been followed by one in
    the prompt (so ``b.log`` is offered after ``a.sh``, not ``c`` after ``a.sh`` in ``a.shc``).
    """
    if not separators or not len(tail) or tail[-1] not in separators:
        return np.empty(0, dtype=prompt.dtype)
    seps = np.fromiter(separators, dtype=prompt.dtype)
    where = np.flatnonzero(~np.isin(prompt, seps))  # the prompt's item tokens, by position
    words = prompt[where]
    ends = _match_ends(words, [t for t in tail if t not in separators], bias)
    ends = ends[where[ends + 1] > where[ends] + 1]  # a separator came between
    return np.unique(words[ends + 1]) if ends.size else np.empty(0, dtype=prompt.dtype)


def _match_ends(prompt: np.ndarray, tail: Sequence[int], bias: CopyBias) -> np.ndarray:
    """Where, in ``prompt`` (but its last token), the longest suffix of ``tail`` of at least
    ``min_match`` tokens ends; empty if none."""
    if not len(tail) or len(prompt) < 2:
        return np.empty(0, dtype=np.int64)
    ends = np.flatnonzero(prompt[:-1] == tail[-1])  # positions where a match ends
    k = 1
    while ends.size and k < bias.max_match and k < len(tail):
        if ends.size == 1 and k >= bias.min_match:
            break  # one match left: a longer suffix would keep it or fail, same candidate
        longer = ends[ends >= k]
        longer = longer[prompt[longer - k] == tail[-1 - k]]
        if not longer.size:
            break
        ends, k = longer, k + 1
    if k < bias.min_match or not ends.size:
        return np.empty(0, dtype=np.int64)
    return ends


def choose(logprobs: torch.Tensor, greedy: int, found: np.ndarray, bias: CopyBias) -> int:
    """The token to emit: the best copy candidate when it is within the margin, else greedy."""
    if not found.size:
        return greedy
    scores = logprobs[torch.as_tensor(found, device=logprobs.device)]
    best = int(scores.argmax())
    if int(found[best]) != greedy and float(scores[best]) >= float(logprobs[greedy]) - bias.margin:
        return int(found[best])
    return greedy


@dataclass(frozen=True, slots=True)
class Markers:
    """A tokenizer's tokens that bound copy bias."""

    opening: int | None  # the observation's opening tag (None: not one token, no copy bias)
    protected: frozenset[int]  # never overridden: end of text, the closing tag
    separators: frozenset[int] = frozenset()  # between items: spaces, commas, breaks, "./"


SEPARATOR_CHARS = frozenset(" ,\t\n")


def is_separator(text: str) -> bool:
    """Does a token of this text only separate items (``item_candidates``)?"""
    return text == "./" or (bool(text) and set(text) <= SEPARATOR_CHARS)


def markers(tokenizer: Any, eos_ids: Collection[int], separators: bool = False) -> Markers:
    """The bounds of copy bias in ``tokenizer``'s ids; ``separators``: also find the tokens
    that separate items (one decode per vocabulary entry: only where ``items`` is on)."""
    def single(tag: str) -> int | None:
        ids = tokenizer.encode(tag, add_special_tokens=False)
        return int(ids[0]) if len(ids) == 1 else None

    close = single(OBS_CLOSE)
    protected = frozenset(eos_ids) | (frozenset() if close is None else {close})
    seps = (frozenset(i for i in range(len(tokenizer)) if is_separator(tokenizer.decode([i])))
            if separators else frozenset())
    return Markers(single(OBS_OPEN), protected, seps - protected)


def next_token(logits: torch.Tensor, prompt: np.ndarray, generated: Sequence[int],
               bias: CopyBias, marks: Markers, greedy: int | None = None) -> int:
    """Greedy with copy bias for one row: ``logits`` are its next-token logits, ``generated``
    the tokens it has generated so far, ``greedy`` the argmax of ``logits`` where the caller
    has it already (else it is taken here)."""
    if greedy is None:
        greedy = int(logits.argmax())
    if greedy in marks.protected or marks.opening is None:
        return greedy
    body = _observation_body(generated, marks.opening)
    if len(body) < bias.min_match:
        return greedy
    found = candidates(prompt, body[-bias.max_match:], bias)
    if not found.size and bias.items and greedy not in marks.separators:
        found = item_candidates(prompt, body[-2 * bias.max_match:], bias, marks.separators)
    if not found.size:
        return greedy
    return choose(torch.log_softmax(logits.float(), dim=-1), greedy, found, bias)


def _observation_body(generated: Sequence[int], opening: int) -> Sequence[int]:
    """What follows the last opening tag (empty before the observation has begun)."""
    for i in range(len(generated) - 1, -1, -1):
        if generated[i] == opening:
            return generated[i + 1:]
    return ()
