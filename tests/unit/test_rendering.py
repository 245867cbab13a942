from __future__ import annotations

import pytest

from worldserve.domains.chat import ChatTemplateError, render_chat
from worldserve.domains.rendering import (
    OBS_CLOSE,
    OBS_OPEN,
    PastTurn,
    PromptInput,
    build_messages,
    shown_from_turn,
    turns_needed,
)
from worldserve.domains.templates import ANSWER_FORMAT, STRICT_SUFFIX, Domain, system_prompt

QWEN_LIKE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.mark.parametrize("domain", list(Domain))
def test_every_domain_has_its_own_prompt_with_the_answer_format(domain: Domain) -> None:
    prompt = system_prompt(domain)
    assert ANSWER_FORMAT in prompt
    assert "<predicted_observation>" in prompt
    others = {system_prompt(d) for d in Domain if d is not domain}
    assert prompt not in others


@pytest.mark.parametrize("domain", list(Domain))
def test_first_turn_messages_for_each_domain(domain: Domain) -> None:
    msgs = build_messages(PromptInput(system_prompt(domain), "do X", "state0", [], "act"), 4)
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[1]["content"]
    assert user.startswith("### Turn 1\n")
    for field in ("**Task Instruction:** do X", "**Historical Context:** This is the first turn.",
                  "**Current State:** state0", "**Action:** act"):
        assert field in user


def test_history_is_interleaved_and_the_new_action_is_last() -> None:
    history = [PastTurn("ls", "a.txt"), PastTurn("cat a.txt", "hello")]
    msgs = build_messages(PromptInput("sys", "t", "s0", history, "pwd"), 4)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[2]["content"] == f"{OBS_OPEN}\na.txt\n{OBS_CLOSE}"
    assert "### Turn 3" in msgs[-1]["content"] and "**Action:** pwd" in msgs[-1]["content"]
    # the initial state belongs to turn 1 only
    assert "**Current State:** s0" in msgs[1]["content"]
    assert "s0" not in msgs[3]["content"]


def test_window_summarises_older_turns() -> None:
    history = [PastTurn(f"echo {i}", str(i)) for i in range(10)]
    msgs = build_messages(PromptInput("sys", "t", "", history, "next"), 3)
    users = [m["content"] for m in msgs if m["role"] == "user"]
    assert len(users) == 4  # 3 replayed + the new action
    assert users[0].startswith("### Turn 8\n")
    assert "7 earlier turn(s) not shown" in users[0] and "echo 0" in users[0]
    assert "### Turn 11" in users[-1]


@pytest.mark.parametrize(("window", "stride"), [(4, 4), (3, 2), (4, 1), (2, 5)])
def test_a_strided_window_keeps_consecutive_prompts_prefix_stable(window: int, stride: int
                                                                   ) -> None:
    def prompt(turns: int) -> str:
        history = [PastTurn(f"echo {i}", str(i)) for i in range(turns)]
        messages = build_messages(PromptInput("sys", "t", "s0", history, f"echo {turns}"),
                                  window, stride=stride)
        return render_chat(QWEN_LIKE, messages)

    moves = 0
    for turns in range(1, 30):
        shown = turns - shown_from_turn(turns, window, stride)
        assert min(turns, window) <= shown <= window + stride - 1
        before, after = prompt(turns - 1), prompt(turns)
        # the previous prompt, up to its generation prompt, starts the next one ...
        stable = after.startswith(before)
        # ... except when the window moves, which happens once every `stride` turns
        moved = shown_from_turn(turns, window, stride) != shown_from_turn(turns - 1, window,
                                                                          stride)
        assert stable != moved
        moves += moved
    assert moves <= 30 // stride + 1


@pytest.mark.parametrize(("window", "stride"), [(4, 4), (4, 1), (2, 3)])
def test_the_latest_turns_render_the_same_prompt_as_the_whole_history(window: int, stride: int
                                                                      ) -> None:
    need = turns_needed(window, stride)
    for turns in range(0, 60, 7):
        history = [PastTurn(f"cmd {i}", f"out {i}") for i in range(turns)]
        offset = max(0, turns - need)
        whole = build_messages(PromptInput("sys", "t", "s0", history, "next"), window,
                               stride=stride)
        tail = build_messages(PromptInput("sys", "t", "s0", history[offset:], "next",
                                          history_offset=offset), window, stride=stride)
        assert tail == whole
    with pytest.raises(ValueError, match="too late"):
        build_messages(PromptInput("sys", "t", "", history[-2:], "next",
                                   history_offset=len(history) - 2), window, stride=stride)


def test_control_instruction_and_strict_mode_extend_the_system_prompt() -> None:
    prompt = PromptInput("sys", "", "", [], "a", control_instruction="Return HTTP 503.")
    system = build_messages(prompt, 4, strict=True)[0]["content"]
    assert system.startswith("sys") and "Return HTTP 503." in system and STRICT_SUFFIX in system


def test_explicit_current_state_is_rendered() -> None:
    msgs = build_messages(PromptInput("sys", "", "s0", [PastTurn("a", "b", "s1")], "c", "s2"), 4)
    assert "**Current State:** s1" in msgs[1]["content"]
    assert "**Current State:** s2" in msgs[-1]["content"]


def test_chat_template_renders_like_the_checkpoint() -> None:
    text = render_chat(QWEN_LIKE, [{"role": "system", "content": "S"},
                                   {"role": "user", "content": "U"}])
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n" \
                   "<|im_start|>assistant\n"


def test_committed_checkpoint_template_matches_training() -> None:
    from worldserve.backends.checkpoint import load_chat_template
    from worldserve.settings import DEFAULT_MODEL_DIR
    from worldserve.training.train import CHAT_TEMPLATE

    assert load_chat_template(DEFAULT_MODEL_DIR).strip() == CHAT_TEMPLATE.strip()


def test_broken_templates_raise_a_clear_error() -> None:
    with pytest.raises(ChatTemplateError):
        render_chat("{% for %}", [])
    with pytest.raises(ChatTemplateError):
        render_chat("{{ raise_exception('no system role') }}", [])
    with pytest.raises(ChatTemplateError):  # the sandbox keeps templates away from Python
        render_chat("{{ messages.__class__.__mro__[1].__subclasses__() }}", [])
