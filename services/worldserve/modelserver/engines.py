"""Generation engines behind the model server: implementations of the port (``port``).

``TransformersEngine`` (``transformers_engine``) loads any Hugging Face causal-LM checkpoint
directory: continuous batching with prefix (KV) reuse across a session's turns.
``VllmEngine`` wraps vLLM's async engine (automatic prefix caching on) where vllm is importable.
``InstantEngine`` answers a fixed, well-formed observation at once: it measures everything around
the model (gateway, Triton, network) and nothing else.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from worldserve.modelserver.contract import GenerationRequest
from worldserve.modelserver.port import Delta, Engine, EngineUnavailable, Sink

log = logging.getLogger(__name__)




class VllmEngine:
    """vLLM's async engine with automatic prefix caching; needs a CUDA machine with vllm."""

    def __init__(self, model_dir: Path, max_batch_size: int = 64) -> None:
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine
        except ImportError as exc:
            raise EngineUnavailable(
                "engine 'vllm' needs the vllm package (pip install vllm) on a CUDA machine; "
                "set WORLDSERVE_ENGINE=transformers to use the transformers engine"
            ) from exc
        import asyncio

        args = AsyncEngineArgs(model=str(model_dir), enable_prefix_caching=True,
                               max_num_seqs=max_batch_size)
        self._engine = AsyncLLMEngine.from_engine_args(args)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def submit(self, request: GenerationRequest, sink: Sink) -> Callable[[], None]:
        import asyncio
        import uuid

        from vllm import SamplingParams

        params = SamplingParams(max_tokens=request.max_tokens, temperature=request.temperature,
                                top_p=request.top_p, seed=request.seed, stop=list(request.stop))
        request_id = uuid.uuid4().hex

        async def run() -> None:
            sent, sent_tokens = "", 0
            async for out in self._engine.generate(request.prompt, params, request_id):
                comp = out.outputs[0]
                n_in = len(out.prompt_token_ids or [])
                sink(Delta(comp.text[len(sent):], n_in, len(comp.token_ids) - sent_tokens,
                           comp.finish_reason if out.finished else None))
                sent, sent_tokens = comp.text, len(comp.token_ids)

        future = asyncio.run_coroutine_threadsafe(run(), self._loop)

        def cancel() -> None:
            future.cancel()
            asyncio.run_coroutine_threadsafe(self._engine.abort(request_id), self._loop)

        return cancel

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


class InstantEngine:
    """No model: every request gets the same short well-formed answer, at once (benchmarks)."""

    ANSWER = "<think>\nok\n</think>\n\n<predicted_observation>\nok\n</predicted_observation>"

    def submit(self, request: GenerationRequest, sink: Sink) -> Callable[[], None]:
        n_in = len(request.prompt.encode()) // 4
        sink(Delta(self.ANSWER, n_in, 12))
        sink(Delta("", n_in, 0, "stop"))
        return lambda: None

    def close(self) -> None:
        pass


ENGINES = ("transformers", "vllm", "instant")


def build_engine(kind: str, model_dir: Path, device: str, max_batch_size: int,
                 batch_wait_ms: float, torch_threads: int, prefix_cache_bytes: int = 256 * 2**20,
                 stream_interval_ms: float = 50.0, long_prompt_tokens: int = 0,
                 long_share: float = 0.05) -> Engine:
    if kind == "transformers":
        from worldserve.modelserver.transformers_engine import LanePolicy, TransformersEngine

        return TransformersEngine(model_dir, device, max_batch_size, batch_wait_ms, torch_threads,
                                  prefix_cache_bytes, stream_interval_ms,
                                  LanePolicy(long_prompt_tokens, long_share))
    if kind == "vllm":
        return VllmEngine(model_dir, max_batch_size)
    if kind == "instant":
        return InstantEngine()
    raise EngineUnavailable(f"unknown engine {kind!r}; expected one of {', '.join(ENGINES)}")
