"""The transformers engine on the committed checkpoint: streaming, batching, counts, seeds."""

from __future__ import annotations

import threading
import time

import pytest

from worldserve.modelserver.contract import GenerationRequest
from worldserve.modelserver.engines import Delta, EngineUnavailable, TransformersEngine, build_engine
from worldserve.settings import DEFAULT_MODEL_DIR

pytestmark = pytest.mark.integration

PROMPT = "<|im_start|>user\n### Turn 1\n**Action:** ls<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    eng = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", max_batch_size=4, batch_wait_ms=50)
    yield eng
    eng.close()


def run(engine: TransformersEngine, requests: list[GenerationRequest]) -> list[list[Delta]]:
    results: list[list[Delta]] = [[] for _ in requests]
    done = [threading.Event() for _ in requests]

    def sink_for(i: int):  # type: ignore[no-untyped-def]
        def sink(d: Delta) -> None:
            results[i].append(d)
            if d.finish_reason:
                done[i].set()
        return sink

    for i, r in enumerate(requests):
        engine.submit(r, sink_for(i))
    for event in done:
        assert event.wait(120)
    return results


def test_streams_and_counts_tokens(engine: TransformersEngine) -> None:
    [deltas] = run(engine, [GenerationRequest(PROMPT, max_tokens=12)])
    text = "".join(d.text for d in deltas)
    n_out = sum(d.num_output_tokens for d in deltas)
    assert deltas[-1].finish_reason in ("stop", "length")
    assert 0 < n_out <= 12
    assert deltas[0].num_input_tokens == len(engine.tokenizer(PROMPT, add_special_tokens=False)
                                            ["input_ids"])
    assert len(deltas) > 2 and text  # several deltas: it streams


def test_concurrent_requests_are_batched_and_match_solo_results(engine: TransformersEngine) -> None:
    solo = "".join(d.text for d in run(engine, [GenerationRequest(PROMPT, max_tokens=16)])[0])
    start = time.monotonic()
    batch = run(engine, [GenerationRequest(PROMPT, max_tokens=16) for _ in range(4)])
    assert all("".join(d.text for d in r) == solo for r in batch)  # greedy: same answer
    assert time.monotonic() - start < 60


def test_a_seed_makes_sampling_repeatable(engine: TransformersEngine) -> None:
    req = GenerationRequest(PROMPT, max_tokens=24, temperature=1.0, top_p=0.95, seed=1234)
    a, b = ("".join(d.text for d in run(engine, [req])[0]) for _ in range(2))
    assert a == b


def test_stop_strings_and_length_limit(engine: TransformersEngine) -> None:
    [full] = run(engine, [GenerationRequest(PROMPT, max_tokens=40)])
    text = "".join(d.text for d in full)
    assert len(text) > 4
    stop = text[2:4]
    [cut] = run(engine, [GenerationRequest(PROMPT, max_tokens=40, stop=(stop,))])
    assert "".join(d.text for d in cut) == text[: text.find(stop)]
    assert cut[-1].finish_reason == "stop"
    [short] = run(engine, [GenerationRequest(PROMPT, max_tokens=3)])
    assert short[-1].finish_reason in ("length", "stop")
    assert sum(d.num_output_tokens for d in short) <= 3


def test_vllm_engine_without_vllm_is_a_clear_error() -> None:
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(EngineUnavailable, match="vllm"):
            build_engine("vllm", DEFAULT_MODEL_DIR, "cpu", 4, 5, 0)
    else:  # pragma: no cover - only where vllm is installed
        pytest.skip("vllm is installed here; the error path cannot be shown")
    with pytest.raises(EngineUnavailable, match="unknown engine"):
        build_engine("nope", DEFAULT_MODEL_DIR, "cpu", 4, 5, 0)
