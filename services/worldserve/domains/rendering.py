"""Turn a session's history into chat messages (the message contract of DESIGN.md §4).

History is interleaved chat turns: user = the action prompt of turn t, assistant = that turn's
observation; the next action is the last user turn. Only the latest ``window`` turns are replayed
verbatim so prompts stay bounded; older actions are named in the Historical Context field.
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


def _omitted_summary(omitted: Sequence[PastTurn]) -> str:
    names = "; ".join(t.action.replace("\n", " ")[:80] for t in omitted)
    if len(names) > _MAX_SUMMARY_CHARS:
        names = "…" + names[-_MAX_SUMMARY_CHARS:]
    return f"{len(omitted)} earlier turn(s) not shown, whose actions were: {names}"


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


def build_messages(
    prompt: PromptInput, window: int, strict: bool = False
) -> list[dict[str, str]]:
    """Chat messages for the next step: system, replayed turns, then the new action."""
    system = prompt.system_prompt
    if prompt.control_instruction:
        system = f"{system}\n\n{prompt.control_instruction}"
    if strict:
        system = f"{system}\n\n{STRICT_SUFFIX}"
    history = list(prompt.history)
    shown_from = max(0, len(history) - max(window, 0))
    summary = _omitted_summary(history[:shown_from]) if shown_from else ""
    first_shown = shown_from + 1

    def user(number: int, action: str, state: str) -> dict[str, str]:
        return {"role": "user", "content": action_prompt(
            number, prompt.task_instruction, _context(number, first_shown, summary),
            _state(number, prompt.initial_state, state), action)}

    messages = [{"role": "system", "content": system}]
    for index in range(shown_from, len(history)):
        turn = history[index]
        messages.append(user(index + 1, turn.action, turn.current_state))
        messages.append({"role": "assistant", "content": observation_message(turn.observation)})
    messages.append(user(len(history) + 1, prompt.action, prompt.current_state))
    return messages


def action_prompts(task_instruction: str, initial_state: str, history: Sequence[PastTurn]
                   ) -> list[str]:
    """Every turn's action prompt with the whole history shown (no window): for exports."""
    return [action_prompt(n, task_instruction,
                          "This is the first turn." if n == 1 else "The previous turns are above.",
                          _state(n, initial_state, t.current_state), t.action)
            for n, t in enumerate(history, start=1)]
