"""Split a world model's completion into reasoning and the predicted observation.

Expected shape: ``<think>…</think>`` (optional) then ``<predicted_observation>…
</predicted_observation>``. A missing or unterminated observation block raises
MalformedCompletion; the caller retries once with a stricter instruction.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from worldserve.domains.rendering import OBS_CLOSE, OBS_OPEN, THINK_CLOSE, THINK_OPEN


class MalformedCompletion(ValueError):
    """The completion holds no complete <predicted_observation> block."""


@dataclass(frozen=True, slots=True)
class ParsedCompletion:
    reasoning: str
    observation: str


def _strip_block(text: str) -> str:
    # Blocks are written as "<tag>\n…\n</tag>": drop exactly that framing newline.
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def parse_completion(text: str) -> ParsedCompletion:
    """Reasoning and observation of a whole completion."""
    reasoning = ""
    rest = text
    think_at = rest.find(THINK_OPEN)
    obs_at = rest.find(OBS_OPEN)
    if think_at != -1 and (obs_at == -1 or think_at < obs_at):
        end = rest.find(THINK_CLOSE, think_at)
        if end == -1:
            raise MalformedCompletion("reasoning block is not terminated")
        reasoning = rest[think_at + len(THINK_OPEN) : end].strip()
        rest = rest[end + len(THINK_CLOSE) :]
    elif THINK_CLOSE in rest and (obs_at == -1 or rest.find(THINK_CLOSE) < obs_at):
        # Qwen3 templates may open <think> in the prompt: the completion starts inside it.
        end = rest.find(THINK_CLOSE)
        reasoning = rest[:end].strip()
        rest = rest[end + len(THINK_CLOSE) :]
    start = rest.find(OBS_OPEN)
    if start == -1:
        raise MalformedCompletion("no <predicted_observation> block")
    end = rest.find(OBS_CLOSE, start)
    if end == -1:
        raise MalformedCompletion("<predicted_observation> block is not terminated")
    return ParsedCompletion(reasoning, _strip_block(rest[start + len(OBS_OPEN) : end]))


class Part(Enum):
    REASONING = "reasoning"
    OBSERVATION = "observation"


class StreamSplitter:
    """Incremental twin of parse_completion: feed text chunks, get (part, delta) pieces.

    Text that might be the start of a tag is held back until the next chunk decides it, so a
    tag split across chunks never leaks into a delta. Framing newlines are not emitted.
    """

    _TAGS = (THINK_OPEN, THINK_CLOSE, OBS_OPEN, OBS_CLOSE)

    def __init__(self) -> None:
        self._buf = ""
        self._where: Part | None = None
        self._done = False
        self._fresh = False  # just entered a block: drop one leading newline
        self._held_newline = False  # a trailing newline that may be framing

    def feed(self, chunk: str) -> list[tuple[Part, str]]:
        self._buf += chunk
        out: list[tuple[Part, str]] = []
        while self._buf and not self._done:
            tag_at, tag = self._next_tag()
            if tag is None:
                keep = self._partial_tag_len()
                self._emit(self._buf[: len(self._buf) - keep], out)
                self._buf = self._buf[len(self._buf) - keep :]
                break
            self._emit(self._buf[:tag_at], out, closing=tag in (THINK_CLOSE, OBS_CLOSE))
            self._buf = self._buf[tag_at + len(tag) :]
            self._switch(tag)
        return out

    def _next_tag(self) -> tuple[int, str | None]:
        best, found = len(self._buf) + 1, None
        for tag in self._TAGS:
            at = self._buf.find(tag)
            if at != -1 and at < best:
                best, found = at, tag
        return best, found

    def _partial_tag_len(self) -> int:
        for keep in range(min(len(self._buf), max(map(len, self._TAGS)) - 1), 0, -1):
            tail = self._buf[-keep:]
            if any(t.startswith(tail) for t in self._TAGS):
                return keep
        return 0

    def _switch(self, tag: str) -> None:
        self._held_newline = False
        if tag == THINK_OPEN:
            self._where, self._fresh = Part.REASONING, True
        elif tag == OBS_OPEN:
            self._where, self._fresh = Part.OBSERVATION, True
        elif tag == OBS_CLOSE and self._where is Part.OBSERVATION:
            self._where, self._done = None, True
        else:
            self._where = None

    def _emit(self, text: str, out: list[tuple[Part, str]], closing: bool = False) -> None:
        if self._where is None or (not text and not closing):
            return
        if self._fresh and text:
            if text.startswith("\n"):
                text = text[1:]
            self._fresh = False
        if self._held_newline:
            text = "\n" + text
            self._held_newline = False
        if closing:
            if text.endswith("\n"):
                text = text[:-1]
        elif text.endswith("\n"):
            text, self._held_newline = text[:-1], True
        if text:
            out.append((self._where, text))

    @property
    def in_observation(self) -> bool:
        """True once the observation block has been entered."""
        return self._where is Part.OBSERVATION or self._done

    @property
    def finished(self) -> bool:
        """True once the observation block has been closed."""
        return self._done
