"""Generation engines behind the model server: a port and its implementations.

``TransformersEngine`` loads any Hugging Face causal-LM checkpoint directory and decodes the
requests that arrive together as one left-padded batch, streaming each row's text as it grows.
``VllmEngine`` wraps vLLM's async engine (automatic prefix caching on) where vllm is importable.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from worldserve.modelserver.contract import GenerationRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Delta:
    """A piece of one request's output; the last one carries finish_reason."""

    text: str
    num_input_tokens: int
    num_output_tokens: int  # tokens behind this delta
    finish_reason: str | None = None
    error: str | None = None


Sink = Callable[[Delta], None]


class EngineUnavailable(RuntimeError):
    """The engine cannot run here (missing package, no device)."""


class Engine(Protocol):
    def submit(self, request: GenerationRequest, sink: Sink) -> Callable[[], None]:
        """Start generating; deltas go to ``sink`` (from any thread); returns a cancel function."""

    def close(self) -> None: ...


def pick_device(setting: str) -> str:
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return setting


@dataclass
class _Row:
    request: GenerationRequest
    sink: Sink
    cancelled: threading.Event
    input_ids: list[int]
    generated: list[int]
    sent_text: str = ""
    sent_tokens: int = 0
    finished: bool = False


class TransformersEngine:
    """Batched streaming generation with transformers on CPU or CUDA."""

    def __init__(self, model_dir: Path, device: str = "auto", max_batch_size: int = 8,
                 batch_wait_ms: float = 5.0, torch_threads: int = 0) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if torch_threads:
            torch.set_num_threads(torch_threads)
        self._torch = torch
        self.device = pick_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        self.model = model.to(self.device)  # type: ignore[arg-type]
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        eos_ids = eos if isinstance(eos, list) else [eos]
        if self.tokenizer.eos_token_id is not None:
            eos_ids.append(self.tokenizer.eos_token_id)
        self.eos_ids = {i for i in eos_ids if i is not None}
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else next(iter(self.eos_ids), 0)
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000
        self._pending: queue.Queue[_Row | None] = queue.Queue()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="engine", daemon=True)
        self._thread.start()

    def submit(self, request: GenerationRequest, sink: Sink) -> Callable[[], None]:
        if self._closed:
            raise EngineUnavailable("engine is closed")
        ids = self.tokenizer(request.prompt, add_special_tokens=False)["input_ids"]
        cancelled = threading.Event()
        self._pending.put(_Row(request, sink, cancelled, list(ids), []))
        return cancelled.set

    def close(self) -> None:
        self._closed = True
        self._pending.put(None)
        self._thread.join(timeout=10)

    # --- the decode loop (engine thread) ---

    def _loop(self) -> None:
        while True:
            first = self._pending.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + self.batch_wait_s
            while len(batch) < self.max_batch_size:
                try:
                    row = self._pending.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if row is None:
                    self._pending.put(None)
                    break
                batch.append(row)
            try:
                self._run_batch(batch)
            except Exception as exc:  # a failed batch must not kill the server
                log.exception("batch failed")
                for row in batch:
                    if not row.finished:
                        row.sink(Delta("", len(row.input_ids), 0, "error", str(exc)))

    def _run_batch(self, rows: list[_Row]) -> None:
        torch = self._torch
        from transformers import DynamicCache

        width = max(len(r.input_ids) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, width - len(r.input_ids):] = torch.tensor(r.input_ids)
            mask[i, width - len(r.input_ids):] = 1
        gens = [self._generator(r.request.seed) for r in rows]
        ids, mask = ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        max_new = max(r.request.max_tokens for r in rows)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                past_key_values=cache, use_cache=True).logits[:, -1, :]
            for _ in range(max_new):
                next_ids = [self._sample(logits[i], r.request, gens[i]) for i, r in enumerate(rows)]
                for i, r in enumerate(rows):
                    if not r.finished:
                        self._advance(r, next_ids[i])
                if all(r.finished for r in rows):
                    return
                step = torch.tensor(next_ids, device=self.device).unsqueeze(-1)
                mask = torch.cat([mask, torch.ones_like(step)], dim=-1)
                positions = positions[:, -1:] + 1
                logits = self.model(input_ids=step, attention_mask=mask, position_ids=positions,
                                    past_key_values=cache, use_cache=True).logits[:, -1, :]
        for r in rows:
            if not r.finished:
                self._finish(r, "length")

    def _generator(self, seed: int | None) -> Any:
        g = self._torch.Generator(device=self.device)
        g.manual_seed(seed if seed is not None else secrets.randbits(63))
        return g

    def _sample(self, logits: Any, request: GenerationRequest, gen: Any) -> int:
        torch = self._torch
        if request.temperature <= 0:
            return int(logits.argmax())
        probs = torch.softmax(logits.float() / request.temperature, dim=-1)
        if request.top_p < 1.0:
            sorted_p, order = probs.sort(descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < request.top_p
            sorted_p = sorted_p * keep
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        return int(torch.multinomial(probs, 1, generator=gen))

    def _advance(self, row: _Row, token: int) -> None:
        if row.cancelled.is_set():
            row.finished = True
            return
        if token in self.eos_ids:
            self._finish(row, "stop")
            return
        row.generated.append(token)
        text = str(self.tokenizer.decode(row.generated, skip_special_tokens=True))
        for stop in row.request.stop:
            at = text.find(stop)
            if at != -1:
                self._flush(row, text[:at])
                self._finish(row, "stop")
                return
        if len(row.generated) >= row.request.max_tokens:
            self._flush(row, text)
            self._finish(row, "length")
            return
        if not text.endswith("\ufffd"):  # an incomplete UTF-8 sequence waits for its next byte
            self._flush(row, text)

    def _flush(self, row: _Row, text: str) -> None:
        if len(text) > len(row.sent_text) and text.startswith(row.sent_text):
            delta = text[len(row.sent_text):]
            row.sink(Delta(delta, len(row.input_ids), len(row.generated) - row.sent_tokens))
            row.sent_text, row.sent_tokens = text, len(row.generated)

    def _finish(self, row: _Row, reason: str) -> None:
        row.finished = True
        row.sink(Delta("", len(row.input_ids), len(row.generated) - row.sent_tokens, reason))


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


def build_engine(kind: str, model_dir: Path, device: str, max_batch_size: int,
                 batch_wait_ms: float, torch_threads: int) -> Engine:
    if kind == "transformers":
        return TransformersEngine(model_dir, device, max_batch_size, batch_wait_ms, torch_threads)
    if kind == "vllm":
        return VllmEngine(model_dir, max_batch_size)
    raise EngineUnavailable(f"unknown engine {kind!r}; expected 'transformers' or 'vllm'")
