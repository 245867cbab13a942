"""An episode as one training sequence (pure): the prompt the gateway renders, and what to learn.

With the gateway's history window (4 turns, moving in strides of 4) the prompts of turns 1–8 of
a session extend each other, so the prompt of an episode's last turn holds every earlier turn's
observation as an assistant message in the format the model answers in. One sequence therefore
teaches every turn's observation, not only the last one's: the loss covers each replayed
observation (after its opening tag, which is not learnt there: a new answer begins with
``<think>``, which only the last turn shows) and the whole last answer (reasoning, observation,
end of turn). Prompt tokens count with a small weight.
"""

from __future__ import annotations

from worldserve.domains.chat import render_chat
from worldserve.domains.faults import control_instruction
from worldserve.domains.rendering import (
    OBS_CLOSE,
    OBS_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    PastTurn,
    PromptInput,
    build_messages,
)
from worldserve.domains.templates import Domain, system_prompt
from worldserve.training import recall
from worldserve.training.collect import Episode

WINDOW = 4
STRIDE = 4
# The loss weight of a prompt's tokens against an answer's 1 (train.Stage.prompt_weight may set
# another; loss_share.py measures what share of the loss each part carries).
PROMPT_WEIGHT = 0.1
END = "<|im_end|>"


def target_text(reasoning: str, observation: str) -> str:
    """The answer the model is trained to give for a turn."""
    return f"{THINK_OPEN}\n{reasoning}\n{THINK_CLOSE}\n\n{OBS_OPEN}\n{observation}\n{OBS_CLOSE}"


def messages_for(ep: Episode, upto: int) -> list[dict[str, str]]:
    """The chat messages the gateway sends for turn ``upto`` (0-based) of ``ep``."""
    history = [PastTurn(t.action, t.observation) for t in ep.turns[:upto]]
    turn = ep.turns[upto]
    prompt = PromptInput(system_prompt(Domain(ep.domain)), ep.task, ep.initial_state, history,
                         turn.action, control_instruction=control_instruction(turn.fault))
    return build_messages(prompt, WINDOW, stride=STRIDE)


def segments(ep: Episode, template: str, prompt_weight: float, style: str = "plain"
             ) -> list[tuple[str, float]]:
    """(text, loss weight) pieces whose concatenation is the last turn's prompt + answer;
    ``style``: the last answer's reasoning (``recall.STYLES``)."""
    last = len(ep.turns) - 1
    out: list[tuple[str, float]] = []
    for m in messages_for(ep, last):
        text = render_chat(template, [m], add_generation_prompt=False)
        if m["role"] == "assistant":
            head = text.index(OBS_OPEN) + len(OBS_OPEN)
            out += [(text[:head], 0.0), (text[head:], 1.0)]
        else:
            out.append((text, prompt_weight))
    out.append((render_chat(template, [], add_generation_prompt=True), prompt_weight))
    final = ep.turns[last]
    why = recall.reasoning(style, ep.domain, ep.turns[:last], final, final.reasoning)
    out.append((target_text(why, final.observation) + END, 1.0))
    return out
