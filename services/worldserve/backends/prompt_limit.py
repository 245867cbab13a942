"""Refuse a prompt the model's context cannot hold before it costs any model time (issue 16).

The model server's check is exact (it tokenizes the whole prompt); this one runs in the gateway,
so an oversized request never travels, never queues and never takes the model server's CPU. It
costs a normal step nothing: a prompt of up to ``COUNT_ABOVE`` times the room left, in bytes, is
passed without tokenizing (a token is at least one byte, and tokens average about two bytes, so
such a prompt fits or is over by little; the model server's exact count decides, in a few
milliseconds). A larger one is tokenized in chunks (cut at whitespace where there is some) until
the count is certainly over the room, so a maximum-size request costs a few milliseconds however
long it is. A cut can only disturb the token that spans it, so chunked counts overcount by about
a token per cut; the bound taken is the sum less two per cut: the gateway does not refuse what
the model server would accept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from worldserve.modelserver.contract import context_exceeded

CHUNK_CHARS = 2048
CUT_SLACK = 2  # tokens a cut may add to a chunked count
COUNT_ABOVE = 2  # prompts over this many bytes per token of room are counted here


class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...


class HFTokenizer:
    """A checkpoint's ``tokenizer.json`` through the ``tokenizers`` library."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as _Tokenizer

        self._tok = _Tokenizer.from_file(str(path))

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)


def load_tokenizer(model_dir: Path) -> Tokenizer | None:
    """The checkpoint's tokenizer, or None (no ``tokenizer.json``, or no ``tokenizers``)."""
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        return HFTokenizer(path)
    except (ImportError, ValueError, OSError):
        return None


def tokens_at_least(tokenizer: Tokenizer, text: str, stop_above: int,
                    chunk_chars: int = CHUNK_CHARS) -> int:
    """A lower bound on ``text``'s token count; counting stops once it is over ``stop_above``."""
    total, slack, pos = 0, 0, 0
    while pos < len(text):
        end = min(len(text), pos + chunk_chars)
        if end < len(text):
            space = max(text.rfind(" ", pos + 1, end), text.rfind("\n", pos + 1, end))
            end = space if space > pos else end
        total += tokenizer.count(text[pos:end])
        if pos:
            slack += CUT_SLACK
        if total - slack > stop_above:
            break
        pos = end
    return total - slack


@dataclass(frozen=True)
class PromptLimit:
    """One model version's context (0 = unknown) and tokenizer (None = not known here)."""

    context: int = 0
    tokenizer: Tokenizer | None = None

    def refusal(self, prompt: str, max_tokens: int) -> str | None:
        """Why ``prompt`` with ``max_tokens`` cannot fit, or None when it may."""
        if not self.context or self.tokenizer is None:
            return None
        budget = self.context - max_tokens
        if len(prompt.encode()) <= COUNT_ABOVE * budget:
            return None
        counted = tokens_at_least(self.tokenizer, prompt, budget)
        if counted <= budget:
            return None
        return context_exceeded(counted, max_tokens, self.context, at_least=True)
