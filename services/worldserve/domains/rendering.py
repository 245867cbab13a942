"""Turn a session's history into chat messages (the message contract of docs/ARCHITECTURE.md §4).

History is interleaved chat turns: user = the action prompt of turn t, assistant = that turn's
observation; the next action is the last user turn. Only the latest turns are replayed verbatim
so prompts stay bounded; older actions are named in the Historical Context field of the first
shown turn.

The shown range starts on a multiple of ``stride`` and holds at least ``window`` turns (when there
are that many), so it moves only every ``stride`` turns: in between, each prompt extends the
previous one token for token and the model server reuses its KV cache (stride 1 = a window that
slides every turn, and the prefix changes every turn).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from worldserve.domains.templates import STRICT_SUFFIX

OBS_OPEN = "<predicted_observation>"
OBS_CLOSE = "</predicted_observation>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_MAX_SUMMARY_CHARS = 600
SUMMARY_TURNS = 8  # the latest omitted actions named in the summary (the rest are counted)


@dataclass(frozen=True, slots=True)
class PastTurn:
    """What the prompt needs of a stored turn."""

    action: str
    observation: str
    current_state: str = ""


@dataclass(frozen=True, slots=True)
class PromptInput:
    system_prompt: str
    task_instruction: str
    initial_state: str
    history: Sequence[PastTurn]
    action: str
    current_state: str = ""
    control_instruction: str = ""
    # ``history`` may be the tail of a longer one: it starts at this turn index (0-based). The
    # tail must reach back to SUMMARY_TURNS turns before the shown ones (see ``turns_needed``).
    history_offset: int = 0


def action_prompt(
    turn_number: int, task_instruction: str, historical_context: str, state: str, action: str
) -> str:
    """The user message of turn ``turn_number`` (1-based)."""
    return (
        f"### Turn {turn_number}\n"
        f"**Task Instruction:** {task_instruction or 'None given.'}\n"
        f"**Historical Context:** {historical_context}\n"
        f"**Current State:** {state or 'As left by the previous turns.'}\n"
        f"**Action:** {action}"
    )


def observation_message(observation: str) -> str:
    """The assistant message that stands for a past turn's observation."""
    return f"{OBS_OPEN}\n{observation}\n{OBS_CLOSE}"


def _omitted_summary(count: int, latest: Sequence[PastTurn]) -> str:
    """``count`` omitted turns, of which ``latest`` (the last SUMMARY_TURNS at most) are named."""
    names = "; ".join(t.action.replace("\n", " ")[:80] for t in latest)
    if len(latest) < count or len(names) > _MAX_SUMMARY_CHARS:
        names = "…" + names[-_MAX_SUMMARY_CHARS:]
    return f"{count} earlier turn(s) not shown, whose actions were: {names}"


def _context(turn_number: int, first_shown: int, summary: str) -> str:
    if turn_number == 1:
        return "This is the first turn."
    if turn_number == first_shown and summary:
        return summary
    return "The previous turns are above."


def _state(turn_number: int, initial_state: str, explicit: str) -> str:
    if explicit:
        return explicit
    return initial_state if turn_number == 1 else ""


def shown_from_turn(turns: int, window: int, stride: int = 1) -> int:
    """Index of the first history turn replayed verbatim, of ``turns`` past turns."""
    window, stride = max(window, 0), max(stride, 1)
    if turns <= window:
        return 0
    return (turns - window) // stride * stride


def turns_needed(window: int, stride: int = 1) -> int:
    """How many of the latest turns a prompt reads, whatever the history's length."""
    return max(window, 0) + max(stride, 1) - 1 + SUMMARY_TURNS


def build_messages(
    prompt: PromptInput, window: int, strict: bool = False, stride: int = 1
) -> list[dict[str, str]]:
    """Chat messages for the next step: system, replayed turns, then the new action."""
    system = prompt.system_prompt
    if prompt.control_instruction:
        system = f"{system}\n\n{prompt.control_instruction}"
    if strict:
        system = f"{system}\n\n{STRICT_SUFFIX}"
    history, offset = list(prompt.history), prompt.history_offset
    total = offset + len(history)
    shown_from = shown_from_turn(total, window, stride)  # absolute turn index
    if offset > max(0, shown_from - SUMMARY_TURNS):
        raise ValueError(f"history starts at turn {offset + 1}: too late for this window")
    summary = (_omitted_summary(shown_from, history[max(0, shown_from - SUMMARY_TURNS - offset):
                                                    shown_from - offset])
               if shown_from else "")
    first_shown = shown_from + 1

    def user(number: int, action: str, state: str) -> dict[str, str]:
        return {"role": "user", "content": action_prompt(
            number, prompt.task_instruction, _context(number, first_shown, summary),
            _state(number, prompt.initial_state, state), action)}

    messages = [{"role": "system", "content": system}]
    for index in range(shown_from, total):
        turn = history[index - offset]
        messages.append(user(index + 1, turn.action, turn.current_state))
        messages.append({"role": "assistant", "content": observation_message(turn.observation)})
    messages.append(user(total + 1, prompt.action, prompt.current_state))
    return messages


def action_prompts(task_instruction: str, initial_state: str, history: Sequence[PastTurn]
                   ) -> list[str]:
    """Every turn's action prompt with the whole history shown (no window): for exports."""
    return [action_prompt(n, task_instruction,
                          "This is the first turn." if n == 1 else "The previous turns are above.",
                          _state(n, initial_state, t.current_state), t.action)
            for n, t in enumerate(history, start=1)]
