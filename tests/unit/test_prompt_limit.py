"""The gateway refuses prompts the context cannot hold, counting no more than it must (issue 16)."""

from __future__ import annotations

from worldserve.backends.prompt_limit import PromptLimit, load_tokenizer, tokens_at_least
from worldserve.settings import DEFAULT_MODEL_DIR


class CountingTokenizer:
    """Whitespace-separated words are tokens; records how much text it was given."""

    def __init__(self) -> None:
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return len(text.split())


def test_a_prompt_up_to_twice_the_room_in_bytes_passes_without_tokenizing() -> None:
    """A normal step costs the gateway nothing; the model server counts such prompts exactly."""
    tok = CountingTokenizer()
    assert PromptLimit(4096, tok).refusal("ls " * 1000, 200) is None
    assert PromptLimit(4096, tok).refusal("x " * 3896, 200) is None  # 3,896 tokens: over by 0
    assert tok.chars == 0
    assert PromptLimit(4096, tok).refusal("x " * 3950, 200) is not None  # counted: over by 54
    assert tok.chars > 0


def test_an_oversized_prompt_is_refused_after_counting_about_the_budget() -> None:
    tok = CountingTokenizer()
    prompt = "x " * 300_000  # 600 kB, 300 k tokens
    message = PromptLimit(4096, tok).refusal(prompt, 200)
    assert message is not None
    assert "at least" in message and "max_tokens is 200" in message
    assert "context of 4096 tokens" in message
    assert tok.chars < 12_000  # a few chunks, not 600 kB


def test_a_long_prompt_that_fits_is_let_through() -> None:
    tok = CountingTokenizer()
    prompt = "abcdefghij " * 3000  # 33 kB in bytes, 3,000 tokens: counted, and it fits
    assert PromptLimit(4096, tok).refusal(prompt, 200) is None
    assert tok.chars == len(prompt)


def test_chunked_counts_never_exceed_the_exact_count_of_the_real_tokenizer() -> None:
    tok = load_tokenizer(DEFAULT_MODEL_DIR)
    assert tok is not None
    texts = ["x " * 5000, "word" * 3000, "naïve café " * 700,
             "<|im_start|>user\n" + "alpha beta\n" * 900 + "<|im_end|>\n",
             "a" * 10_000, "\n\n" * 3000]
    for text in texts:
        exact = tok.count(text)
        for chunk in (16, 100, 2048):
            bound = tokens_at_least(tok, text, 10**9, chunk)
            assert bound <= exact, (text[:20], chunk, bound, exact)
            assert bound >= exact * 0.5


def test_without_a_context_or_tokenizer_the_model_server_decides() -> None:
    assert PromptLimit(0, CountingTokenizer()).refusal("x " * 10**5, 10) is None
    assert PromptLimit(4096, None).refusal("x " * 10**5, 10) is None
    assert load_tokenizer(DEFAULT_MODEL_DIR.parent) is None
