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
nothing changes.

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

from worldserve.domains.rendering import OBS_CLOSE, OBS_OPEN


@dataclass(frozen=True, slots=True)
class CopyBias:
    min_match: int = 3  # tokens of suffix that must recur in the prompt
    margin: float = 2.0  # nats below the greedy choice a copy candidate may be
    max_match: int = 32  # longest suffix looked for (a longer one is just as good a match)

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
    unknown = set(raw) - {"min_match", "margin", "max_match"}
    if unknown:
        raise ValueError(f"copy_bias: unknown field(s) {sorted(unknown)}")
    default = CopyBias()
    return CopyBias(int(str(raw.get("min_match", default.min_match))),
                    float(str(raw.get("margin", default.margin))),
                    int(str(raw.get("max_match", default.max_match))))


def to_mapping(bias: CopyBias) -> dict[str, object]:
    return {"min_match": bias.min_match, "margin": bias.margin, "max_match": bias.max_match}


def candidates(prompt: np.ndarray, tail: Sequence[int], bias: CopyBias) -> np.ndarray:
    """Tokens that followed, in ``prompt``, the longest suffix of ``tail`` found there.

    ``tail`` is what the match may use (the observation generated so far; its last
    ``max_match`` tokens are enough): no suffix reaches further back. Empty when no suffix of at
    least ``min_match`` tokens occurs with a token after it."""
    if not len(tail) or len(prompt) < 2:
        return np.empty(0, dtype=prompt.dtype)
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
        return np.empty(0, dtype=prompt.dtype)
    return np.unique(prompt[ends + 1])


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


def markers(tokenizer: Any, eos_ids: Collection[int]) -> Markers:
    def single(tag: str) -> int | None:
        ids = tokenizer.encode(tag, add_special_tokens=False)
        return int(ids[0]) if len(ids) == 1 else None

    close = single(OBS_CLOSE)
    return Markers(single(OBS_OPEN),
                   frozenset(eos_ids) | (frozenset() if close is None else {close}))


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
    if not found.size:
        return greedy
    return choose(torch.log_softmax(logits.float(), dim=-1), greedy, found, bias)


def _observation_body(generated: Sequence[int], opening: int) -> Sequence[int]:
    """What follows the last opening tag (empty before the observation has begun)."""
    for i in range(len(generated) - 1, -1, -1):
        if generated[i] == opening:
            return generated[i + 1:]
    return ()
