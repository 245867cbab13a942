"""The transformers engine on the committed checkpoint: streaming, batching, counts, seeds."""

from __future__ import annotations

import threading
import time

import pytest

from worldserve.modelserver.contract import GenerationRequest
from worldserve.modelserver.engines import build_engine
from worldserve.modelserver.port import Delta, EngineUnavailable
from worldserve.modelserver.transformers_engine import TransformersEngine
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


# --- prefix (KV) reuse and continuous batching ---

def _turn_prompts(engine: TransformersEngine, turns: int) -> list[str]:
    """Prompts of consecutive turns of one Terminal episode, as the gateway renders them."""
    from worldserve.backends.checkpoint import load_chat_template
    from worldserve.domains.chat import render_chat
    from worldserve.domains.rendering import PastTurn, PromptInput, build_messages
    from worldserve.domains.templates import Domain, system_prompt

    template = load_chat_template(DEFAULT_MODEL_DIR)
    history: list[PastTurn] = []
    prompts = []
    for t in range(turns):
        action = f"echo step {t} >> log.txt && wc -l log.txt"
        prompt = PromptInput(system_prompt(Domain.TERMINAL), "Keep a log.", "empty dir", history,
                             action)
        prompts.append(render_chat(template, build_messages(prompt, window=8, stride=8)))
        history.append(PastTurn(action, f"{t + 1} log.txt"))
    return prompts


def _text(deltas: list[Delta]) -> str:
    return "".join(d.text for d in deltas)


def test_turn_n_prefills_only_its_new_tokens_and_answers_the_same() -> None:
    with_reuse = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", prefix_cache_bytes=64 * 2**20)
    without = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", prefix_cache_bytes=0)
    try:
        prompts = _turn_prompts(with_reuse, 4)
        for n, prompt in enumerate(prompts):
            request = GenerationRequest(prompt, max_tokens=24)
            before = with_reuse.stats.prefilled_tokens
            [a] = run(with_reuse, [request])
            [b] = run(without, [request])
            assert _text(a) == _text(b)  # greedy: reuse changes nothing but the work done
            prefilled = with_reuse.stats.prefilled_tokens - before
            n_prompt = a[0].num_input_tokens
            if n == 0:
                assert prefilled == n_prompt
            else:  # everything up to the previous prompt came from the cache
                previous = len(with_reuse.tokenizer(prompts[n - 1], add_special_tokens=False)
                               ["input_ids"])
                assert prefilled <= n_prompt - previous + 1, (prefilled, n_prompt, previous)
        assert with_reuse.prefix.stats.hits >= 3
        assert without.stats.prefilled_tokens == without.stats.prompt_tokens
        assert len(without.prefix) == 0
    finally:
        with_reuse.close()
        without.close()


def test_the_cache_stays_within_its_byte_bound() -> None:
    bound = 3 * 2**20
    engine = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", prefix_cache_bytes=bound)
    try:
        prompts = [f"<|im_start|>user\n### Turn 1\n**Action:** cat file{i}.txt " * 20
                   for i in range(12)]
        run(engine, [GenerationRequest(p, max_tokens=4) for p in prompts])
        assert 0 < engine.prefix.nbytes <= bound
        assert engine.prefix.stats.evicted > 0
        # what the entries really hold alive (no view keeps a larger tensor behind it)
        storages = {}
        for entry in engine.prefix._entries.values():
            tensors = [t for kv in entry.value for t in kv]
            tensors += [payload for payload, _ in entry.marks.values()]
            for t in tensors:
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        assert sum(storages.values()) <= engine.prefix.nbytes
    finally:
        engine.close()


# Sampling at a high temperature hardly ever draws the end token: a long answer, by seed.
LONG = GenerationRequest(PROMPT, max_tokens=300, temperature=5.0, seed=7)


def test_a_short_request_does_not_wait_for_a_long_one(engine: TransformersEngine) -> None:
    finished: dict[str, str] = {}
    started, done = threading.Event(), threading.Event()

    def sink_for(name: str):  # type: ignore[no-untyped-def]
        def sink(d: Delta) -> None:
            started.set()
            if d.finish_reason:
                finished[name] = d.finish_reason
                if len(finished) == 2:
                    done.set()
        return sink

    engine.submit(LONG, sink_for("long"))
    assert started.wait(60)  # the long one is decoding: the short one joins the running batch
    engine.submit(GenerationRequest(PROMPT, max_tokens=2), sink_for("short"))
    assert done.wait(120)
    assert list(finished) == ["short", "long"]
    assert finished["long"] == "length"


def test_a_cancelled_request_leaves_the_batch(engine: TransformersEngine) -> None:
    steps = engine.stats.decode_steps
    started = threading.Event()
    cancel = engine.submit(LONG, lambda d: started.set())
    assert started.wait(60)
    cancel()
    time.sleep(0.3)
    after = engine.stats.decode_steps
    time.sleep(0.3)
    assert engine.stats.decode_steps == after  # nothing decodes any more
    assert after - steps < 300


def test_the_instant_engine_answers_a_well_formed_observation_at_once() -> None:
    from worldserve.domains.parsing import parse_completion

    engine = build_engine("instant", DEFAULT_MODEL_DIR, "cpu", 4, 5, 0)
    got: list[Delta] = []
    engine.submit(GenerationRequest(PROMPT, max_tokens=8), got.append)
    assert got[-1].finish_reason == "stop"
    assert parse_completion("".join(d.text for d in got)).observation == "ok"
    engine.close()


def test_the_stream_interval_sends_fewer_deltas_with_the_same_text(engine: TransformersEngine
                                                                    ) -> None:
    slow = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", stream_interval_ms=60_000)
    try:
        [batched] = run(slow, [LONG])
    finally:
        slow.close()
    [eager] = run(engine, [LONG])
    assert _text(batched) == _text(eager)
    text_deltas = [d for d in batched if d.text]
    # the first 8 tokens one by one, a chunk ends at each token that closes a tag ('>'), and the
    # rest comes at the end
    assert len(text_deltas) <= 8 + _text(batched).count(">") + 1
    for d in text_deltas[8:-1]:  # a chunk cut early ends with its tag's '>'
        assert ">" in d.text
    assert sum(d.num_output_tokens for d in batched) == LONG.max_tokens


def test_a_repeated_prompt_is_not_prefilled_again_and_samples_the_same(engine: TransformersEngine
                                                                       ) -> None:
    request = GenerationRequest(PROMPT + " again", max_tokens=24, temperature=1.0, seed=99)
    [first] = run(engine, [request])
    before = engine.stats.prefilled_tokens
    [second] = run(engine, [request])
    assert engine.stats.prefilled_tokens == before  # the prompt's KV and logits were kept
    assert _text(second) == _text(first)


def _long_prompt() -> str:
    """A held-out state long enough for the long lane of an engine whose bound is 100 tokens."""
    files = "\n".join(f"--- f{i}.txt ---\nalpha beta gamma {i}\ndelta {i * 7}" for i in range(20))
    return ("<|im_start|>user\nCurrent directory: /home/agent\nFiles: "
            + ", ".join(f"f{i}.txt" for i in range(20)) + "\n" + files
            + "\n### Turn 1\n**Action:** cat f3.txt<|im_end|>\n<|im_start|>assistant\n")


def test_a_long_prompt_prefilled_in_chunks_in_its_own_lane_answers_the_same(
        engine: TransformersEngine) -> None:
    """Chunked prefill and a batch of its own change nothing in what greedy decoding writes."""
    from worldserve.modelserver.transformers_engine import LanePolicy

    request = GenerationRequest(_long_prompt(), max_tokens=40)
    assert len(engine.tokenizer(request.prompt)["input_ids"]) > 300
    laned = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", prefix_cache_bytes=0,
                               lanes=LanePolicy(long_prompt_tokens=100))
    try:
        [chunked] = run(laned, [request])
        assert laned.stats.long_requests == 1 and laned.stats.long_seconds > 0
        assert laned.stats.prefilled_tokens == laned.stats.prompt_tokens
    finally:
        laned.close()
    [whole] = run(engine, [request])
    assert _text(chunked) == _text(whole)


def test_the_long_lane_gets_its_share_while_others_decode_and_all_when_alone() -> None:
    """While short rows decode, the long lane takes at most about its share of engine time (here
    0.2); it is never starved: it finishes, alone, after them."""
    from worldserve.modelserver.transformers_engine import LanePolicy

    eng = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", max_batch_size=8, prefix_cache_bytes=0,
                             lanes=LanePolicy(long_prompt_tokens=100, long_share=0.2))
    done = threading.Event()
    finished: list[str] = []
    seen: dict[str, float] = {}

    def sink_for(name: str):  # type: ignore[no-untyped-def]
        def sink(d: Delta) -> None:
            if not d.finish_reason:
                return
            finished.append(name)
            if name.startswith("short") and len(finished) == 4:  # the engine thread: consistent
                s = eng.stats
                seen.update(long=s.long_seconds, total=s.prefill_seconds + s.decode_seconds)
            if len(finished) == 5:
                done.set()
        return sink

    try:
        run(eng, [GenerationRequest(PROMPT, max_tokens=2)])  # warm
        base = eng.stats.prefill_seconds + eng.stats.decode_seconds
        for i in range(4):
            eng.submit(GenerationRequest(PROMPT + f" {i}", max_tokens=120,
                                         stop=("\x00never",)), sink_for(f"short{i}"))
        eng.submit(GenerationRequest(_long_prompt() * 3, max_tokens=120), sink_for("long"))
        assert done.wait(300)
    finally:
        eng.close()
    assert finished[-1] == "long"
    assert eng.stats.long_requests == 1
    share = seen["long"] / (seen["total"] - base)
    print(f"long-lane share while others decoded: {share:.3f}")
    assert 0 < share < 0.3, share


def test_a_queued_long_prompt_still_starts_from_its_cached_prefix() -> None:
    """A long prompt waits in the chunked-prefill queue without holding cached KV, and still
    computes only what its cached prefix does not cover when its turn comes."""
    from worldserve.modelserver.transformers_engine import LanePolicy

    eng = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", prefix_cache_bytes=64 * 2**20,
                             lanes=LanePolicy(long_prompt_tokens=100))
    try:
        first = _long_prompt()
        run(eng, [GenerationRequest(first, max_tokens=2)])
        second = first + " ".join(f"word{i}" for i in range(40))
        n = len(eng.tokenizer(second, add_special_tokens=False)["input_ids"])
        before = eng.stats.prefilled_tokens
        run(eng, [GenerationRequest(second, max_tokens=2)])
        computed = eng.stats.prefilled_tokens - before
    finally:
        eng.close()
    assert eng.stats.long_requests == 2
    assert 32 < computed < n // 2, (computed, n)  # queued (over a chunk), prefix reused


def test_long_prompts_never_take_a_short_requests_slot() -> None:
    """With one slot, long prompts that came first (and run at a small share of the engine) do
    not keep a short request out of its lane: it starts at once and finishes first."""
    from worldserve.modelserver.transformers_engine import LanePolicy

    eng = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", max_batch_size=1, prefix_cache_bytes=0,
                             lanes=LanePolicy(long_prompt_tokens=100, long_share=0.05))
    finished: list[str] = []
    done = threading.Event()

    def sink_for(name: str):  # type: ignore[no-untyped-def]
        def sink(d: Delta) -> None:
            if d.finish_reason:
                finished.append(name)
                if len(finished) == 3:
                    done.set()
        return sink

    try:
        run(eng, [GenerationRequest(PROMPT, max_tokens=2)])  # warm
        for i in range(2):
            eng.submit(GenerationRequest(_long_prompt() * 3 + f" {i}", max_tokens=40,
                                         stop=("\x00never",)), sink_for(f"long{i}"))
        time.sleep(0.2)  # both long prompts are in the engine before the short one comes
        eng.submit(GenerationRequest(PROMPT, max_tokens=60, stop=("\x00never",)),
                   sink_for("short"))
        assert done.wait(300)
    finally:
        eng.close()
    assert finished[0] == "short", finished
    assert eng.stats.long_requests == 2


def test_a_long_prompt_failing_as_it_starts_decoding_leaves_the_next_one_queued() -> None:
    """A failure after a prefill left the queue must not drop the prompt queued behind it."""
    from worldserve.modelserver.transformers_engine import LanePolicy

    eng = TransformersEngine(DEFAULT_MODEL_DIR, "cpu", prefix_cache_bytes=0,
                             lanes=LanePolicy(long_prompt_tokens=100))
    ready = eng._ready
    failed: list[bool] = []

    def ready_once_failing(*args):  # type: ignore[no-untyped-def]
        if not failed:
            failed.append(True)
            raise RuntimeError("injected")
        return ready(*args)

    eng._ready = ready_once_failing  # type: ignore[method-assign]
    try:
        first, second = run(eng, [GenerationRequest(_long_prompt(), max_tokens=4),
                                  GenerationRequest(_long_prompt() + " ", max_tokens=4)])
    finally:
        eng.close()
    assert first[-1].finish_reason == "error" and "injected" in (first[-1].error or "")
    assert second[-1].finish_reason in ("stop", "length")
