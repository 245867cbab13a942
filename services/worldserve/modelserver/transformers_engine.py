"""The transformers engine: continuous batching with prefix (KV) reuse, on CPU or CUDA.

One engine thread owns the model. Each request is prefilled on its own, starting from the KV
of the longest cached token prefix (``prefix_cache``), so a session's turn N prefills only the
tokens turn N-1 did not cover. Its KV then joins the running batch — left-padded to the batch's
width, with an attention mask and explicit positions — and decodes one token per step with the
others. Requests join and leave between steps (continuous batching): a short answer does not
wait for a long one, and a new request does not wait for the batch to drain. When a request
finishes, its KV (prompt + generated tokens) is stored for the session's next turn.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from worldserve.domains import modelcard
from worldserve.modelserver import copying
from worldserve.modelserver.contract import GenerationRequest, context_exceeded
from worldserve.modelserver.port import (
    ContextExceeded,
    Delta,
    EngineUnavailable,
    Sink,
    cpu_threads,
    pick_device,
)
from worldserve.modelserver.prefix_cache import PrefixCache

log = logging.getLogger(__name__)

EAGER_TOKENS = 8  # streamed one by one before the stream interval applies

KV = list[tuple[Any, Any]]  # per layer (keys, values), each [batch, heads, positions, head_dim]


class GrowingLayer(DynamicLayer):
    """A cache layer whose keys/values live in buffers with spare positions: a decode step
    writes its one position in place instead of copying the whole cache (``torch.cat``), which
    was an eighth of a batched decode step on CPU."""

    def assign(self, keys: Any, values: Any) -> None:
        b, h, n, _ = keys.shape
        spare = max(64, n // 2)
        self._k = keys.new_empty((b, h, n + spare, keys.shape[-1]))
        self._v = values.new_empty((b, h, n + spare, values.shape[-1]))
        self._k[:, :, :n] = keys
        self._v[:, :, :n] = values
        self._n = n
        self.keys, self.values = self._k[:, :, :n], self._v[:, :, :n]
        self.device, self.is_initialized = keys.device, True

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any
               ) -> tuple[Any, Any]:
        n = self._n + key_states.shape[-2]
        if n > self._k.shape[-2]:
            self.assign(torch.cat([self._k[:, :, :self._n], key_states], dim=-2),
                        torch.cat([self._v[:, :, :self._n], value_states], dim=-2))
        else:
            self._k[:, :, self._n:n] = key_states
            self._v[:, :, self._n:n] = value_states
            self._n = n
            self.keys, self.values = self._k[:, :, :n], self._v[:, :, :n]
        return self.keys, self.values


def _growing_layer(keys: Any, values: Any) -> GrowingLayer:
    layer = GrowingLayer()
    layer.assign(keys, values)
    return layer


@dataclass
class _Row:
    request: GenerationRequest
    sink: Sink
    cancelled: threading.Event
    input_ids: list[int]
    generated: list[int] = field(default_factory=list)
    prompt_array: Any = None  # input_ids as an array, for copy-bias lookups (made on demand)
    copies: bool = True  # copy bias may apply to it (copying.applies; with the card's bias)
    kv_tokens: list[int] = field(default_factory=list)  # tokens whose KV this row holds
    generator: Any = None
    sent_text: str = ""
    sent_tokens: int = 0
    sent_at: float = 0.0  # monotonic time of the last streamed delta
    finished: bool = False


@dataclass
class _Batch:
    """Rows decoding together: one left-padded KV cache, its mask and the next-token logits."""

    rows: list[_Row] = field(default_factory=list)
    cache: Any = None  # DynamicCache of GrowingLayers
    mask: Any = None  # [batch, width] attention mask
    logits: Any = None  # [batch, vocab] next-token logits

    def join(self, row: _Row, layers: KV, mask: Any, logits: Any) -> None:
        if not self.rows:
            self.rows = [row]
            self.cache = DynamicCache()
            self.cache.layers = [_growing_layer(k, v) for k, v in layers]
            self.mask, self.logits = mask, logits
            return
        width, length = self.mask.shape[1], mask.shape[1]
        grow, pad = max(0, length - width), max(0, width - length)
        for layer, (k, v) in zip(self.cache.layers, layers, strict=True):
            layer.assign(torch.cat([_left_pad(layer.keys, grow), _left_pad(k, pad)], dim=0),
                         torch.cat([_left_pad(layer.values, grow), _left_pad(v, pad)], dim=0))
        self.mask = torch.cat([_left_pad(self.mask, grow), _left_pad(mask, pad)], dim=0)
        self.logits = torch.cat([self.logits, logits], dim=0)
        self.rows.append(row)

    def select(self, keep: list[int]) -> None:
        """Drop finished rows and the padding columns nobody needs any more."""
        self.rows = [self.rows[i] for i in keep]
        if not keep:
            self.cache, self.mask, self.logits = None, None, None
            return
        index = torch.tensor(keep, device=self.mask.device)
        mask = self.mask.index_select(0, index)
        start = int((mask.sum(0) > 0).nonzero()[0])  # leading columns that are padding for all
        for layer in self.cache.layers:
            layer.assign(layer.keys.index_select(0, index)[:, :, start:],
                         layer.values.index_select(0, index)[:, :, start:])
        self.mask = mask[:, start:]
        self.logits = self.logits.index_select(0, index)

    def clear(self) -> None:
        self.rows, self.cache, self.mask, self.logits = [], None, None, None


@dataclass
class _Prefill:
    """A long prompt computed a chunk at a time between the other rows' decode steps."""

    row: _Row
    cache: Any  # None while queued: the prefix is matched when its turn comes
    reused: int  # prompt positions that came from the prefix cache
    done: int  # prompt positions whose KV is computed


@dataclass(frozen=True)
class LanePolicy:
    """How a long prompt shares the engine (issue 16, docs/ARCHITECTURE.md §5).

    A prompt over ``long_prompt_tokens`` (0 = half the model's context) decodes in a batch of
    its own, so it never widens the other rows' cache to its length, and is prefilled
    ``prefill_chunk`` tokens at a time. While other rows are decoding, the long lane gets at most
    ``long_share`` of the engine's time (measured, decaying); alone, it gets all of it. Its
    prompts never take the short lane's slots. Chunks of 32 tokens rather than 64 halve what a
    short row arriving mid-chunk waits (victims' p99 1.14x -> 1.05x, docs/BENCHMARKS.md)."""

    long_prompt_tokens: int = 0
    long_share: float = 0.05
    prefill_chunk: int = 32


LANE_DECAY = 0.98  # per loop turn: the share is measured over roughly the last 50 turns


@dataclass
class EngineStats:
    requests: int = 0
    prompt_tokens: int = 0
    prefilled_tokens: int = 0  # prompt tokens actually computed (the rest came from the cache)
    generated_tokens: int = 0
    decode_steps: int = 0
    decode_rows: int = 0  # sum of batch sizes over decode steps
    prefill_seconds: float = 0.0  # engine-thread time in prefills (admissions)
    decode_seconds: float = 0.0  # engine-thread time in decode steps
    long_requests: int = 0  # requests that went to the long lane
    long_seconds: float = 0.0  # engine-thread time in the long lane (prefill chunks, decoding)


class TransformersEngine:
    """Continuous-batching streaming generation with transformers and a prefix KV cache."""

    def __init__(self, model_dir: Path, device: str = "auto", max_batch_size: int = 8,
                 batch_wait_ms: float = 5.0, torch_threads: int = 0,
                 prefix_cache_bytes: int = 256 * 2**20, stream_interval_ms: float = 50.0,
                 lanes: LanePolicy | None = None, copy_bias: bool = True) -> None:
        from transformers import AutoTokenizer

        self.device = pick_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.max_batch_size = max(1, max_batch_size)
        # A row's first EAGER_TOKENS go out token by token (the gateway needs the opening tag
        # and a little text to start streaming), later text at most every interval (0 = each
        # token): fewer messages through Triton and the gateway, same text. A token that ends a
        # tag ('>') is sent at once, so a chunk ends exactly there: the gateway, which splits
        # reasoning from observation on tags, meters both as it would token by token.
        vocab = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        self._tag_ends = frozenset(i for i, t in enumerate(vocab) if t and ">" in t)
        self.stream_interval_s = max(0.0, stream_interval_ms) / 1000
        self.batch_wait_s = batch_wait_ms / 1000
        self.prefix = PrefixCache(prefix_cache_bytes)
        self.stats = EngineStats()
        self.lanes = lanes or LanePolicy()
        # Greedy rows decode with the copy bias the model card declares (copying.py); False:
        # plain greedy whatever the card says.
        self.copy_bias = (copying.from_mapping(modelcard.read(model_dir).copy_bias)
                          if copy_bias else None)
        self._short = _Batch()  # every row whose prompt is not long
        self._long = _Batch()
        self._prefills: collections.deque[_Prefill] = collections.deque()
        self._lane_s = {"short": 0.0, "long": 0.0}  # decaying engine time per lane
        self._long_turn = False  # the long lane alternates a prefill chunk and a decode step
        self._pending: queue.Queue[_Row | None] = queue.Queue()
        self._closed = False
        # Every torch call happens on the engine thread, the model load included: on CPU, a
        # second thread's OpenMP team (here: the loader's) made each decode step ~2.5x slower.
        self._loaded = threading.Event()
        self._load_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(model_dir, torch_threads),
                                        name="engine", daemon=True)
        self._thread.start()
        self._loaded.wait()
        if self._load_error is not None:
            raise self._load_error

    def _load(self, model_dir: Path, torch_threads: int) -> None:
        from transformers import AutoModelForCausalLM

        if self.device == "cpu":
            torch.set_num_threads(cpu_threads(torch_threads, len(os.sched_getaffinity(0)),
                                              torch.get_num_threads()))
        elif torch_threads:
            torch.set_num_threads(torch_threads)
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
        self.model = model.to(self.device)  # type: ignore[arg-type]
        self.model.eval()
        eos = self.model.generation_config.eos_token_id
        eos_ids = eos if isinstance(eos, list) else [eos]
        if self.tokenizer.eos_token_id is not None:
            eos_ids.append(self.tokenizer.eos_token_id)
        self.eos_ids = {i for i in eos_ids if i is not None}
        self._marks = copying.markers(self.tokenizer, self.eos_ids,
                                      separators=bool(self.copy_bias and self.copy_bias.items))
        config = self.model.config.get_text_config(decoder=True)
        self.context_tokens = int(getattr(config, "max_position_embeddings", 0) or 2**31 - 1)
        self.long_prompt_tokens = self.lanes.long_prompt_tokens or max(1, self.context_tokens // 2)
        full_attention = not getattr(config, "sliding_window", None) or not getattr(
            config, "use_sliding_window", True)
        if self.prefix.max_bytes and not full_attention:
            log.warning("prefix reuse is off: sliding-window attention is not supported")
            self.prefix = PrefixCache(0)

    def submit(self, request: GenerationRequest, sink: Sink) -> Callable[[], None]:
        if self._closed:
            raise EngineUnavailable("engine is closed")
        ids = self.tokenizer(request.prompt, add_special_tokens=False)["input_ids"]
        too_long = context_exceeded(len(ids), request.max_tokens, self.context_tokens)
        if too_long:  # refused before any model time: one request cannot stall the batch
            raise ContextExceeded(too_long)
        cancelled = threading.Event()
        self._pending.put(_Row(request, sink, cancelled, list(ids),
                               copies=copying.applies(request.prompt)))
        return cancelled.set

    def close(self) -> None:
        self._closed = True
        self._pending.put(None)
        self._thread.join(timeout=10)

    # --- the engine thread ---

    def _run(self, model_dir: Path, torch_threads: int) -> None:
        try:
            self._load(model_dir, torch_threads)
        except BaseException as exc:  # surfaced by __init__
            self._load_error = exc
            return
        finally:
            self._loaded.set()
        self._loop()

    def _loop(self) -> None:
        closing = False
        while not (closing and self._idle()):
            new, closing = self._take(closing)
            started = time.perf_counter()
            for row in new:
                try:
                    self._admit(row)
                except Exception as exc:  # one bad request must not stop the others
                    log.exception("prefill failed")
                    row.sink(Delta("", len(row.input_ids), 0, "error", str(exc)))
            took = time.perf_counter() - started
            self.stats.prefill_seconds += took
            self._lane_s["short"] += took
            if self._short.rows:
                self._decode_quantum(self._short, "short")
            if self._long_due():
                if self._can_prefill() and not (self._long.rows and self._long_turn):
                    self._prefill_quantum()
                else:
                    self._decode_quantum(self._long, "long")
                self._long_turn = not self._long_turn
            for lane in self._lane_s:
                self._lane_s[lane] *= LANE_DECAY

    def _idle(self) -> bool:
        return not (self._short.rows or self._long.rows or self._prefills)

    def _long_due(self) -> bool:
        """Long work waits while others decode and the long lane has had its share."""
        if not (self._can_prefill() or self._long.rows):
            return False
        if not self._short.rows:
            return True
        spent = self._lane_s["long"]
        return spent <= self.lanes.long_share * (spent + self._lane_s["short"])

    def _can_prefill(self) -> bool:
        """A queued long prompt may advance: the long lane has a row free for it."""
        return bool(self._prefills) and len(self._long.rows) < self.max_batch_size

    def _prefill_quantum(self) -> None:
        """One chunk of the first queued long prompt, timed to the long lane."""
        started = time.perf_counter()
        head = self._prefills[0]
        try:
            self._prefill_chunk(head)
        except Exception as exc:  # one bad request must not stop the others
            log.exception("prefill failed")
            if self._prefills and self._prefills[0] is head:  # it may have left the queue
                self._prefills.popleft()
            head.row.sink(Delta("", len(head.row.input_ids), 0, "error", str(exc)))
        took = time.perf_counter() - started
        self.stats.prefill_seconds += took
        self._spent("long", took)

    def _decode_quantum(self, batch: _Batch, lane: str) -> None:
        """One decode step of ``batch``, timed to ``lane``."""
        started = time.perf_counter()
        try:
            self._decode_step(batch)
        except Exception as exc:  # a failed step must not kill the server
            log.exception("decode step failed")
            for row in batch.rows:
                if not row.finished:
                    row.sink(Delta("", len(row.input_ids), 0, "error", str(exc)))
            batch.clear()
        took = time.perf_counter() - started
        self.stats.decode_seconds += took
        self._spent(lane, took)

    def _spent(self, lane: str, seconds: float) -> None:
        self._lane_s[lane] += seconds
        if lane == "long":
            self.stats.long_seconds += seconds

    def _take(self, closing: bool) -> tuple[list[_Row], bool]:
        """New requests for the free slots: wait for one (and a little for company) when idle;
        never wait while a batch is decoding.

        Slots are the short lane's: a long prompt never takes one (it would hold it for as long
        as its small share of the engine lets it run, and make a short request wait for the
        lane it is kept out of), so long prompts are taken whenever they come and wait in the
        chunked-prefill queue, which the long lane bounds (``_long_due``)."""
        free = self.max_batch_size - len(self._short.rows)
        taken: list[_Row] = []
        if closing or free <= 0:
            return taken, closing
        idle = self._idle()
        deadline = 0.0
        while free > 0:
            try:
                if not idle:
                    row = self._pending.get_nowait()
                elif not taken:
                    row = self._pending.get()  # idle: block for the first request
                else:
                    row = self._pending.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if row is None:
                return taken, True
            if idle and not taken:
                deadline = time.monotonic() + self.batch_wait_s
            taken.append(row)
            if self._batch_for(len(row.input_ids)) is self._short:
                free -= 1
        return taken, closing

    def _admit(self, row: _Row) -> None:
        """Prefill one request from its longest cached prefix and add it to the short lane's
        batch; a long prompt is queued for chunked prefill instead."""
        if row.cancelled.is_set():
            return
        tokens = row.input_ids
        if not tokens:
            raise ValueError("the prompt is empty")
        n = len(tokens)
        batch = self._batch_for(n)
        long = batch is self._long
        if long:
            self.stats.long_requests += 1
        exact = self.prefix.marked(tokens) if self.prefix.max_bytes else None
        if exact is not None:  # seen before, logits and all: nothing to compute
            kv, logits = exact
            self._ready(batch, row, [(k[:, :, :n], v[:, :, :n]) for k, v in kv], logits, n)
            return
        pending = _Prefill(row, None, 0, 0)
        if long:
            # the long lane computes it a chunk at a time, from its cached prefix when its turn
            # comes: no views of cached KV are held while queued, so a queue of any length stays
            # within the prefix cache's byte bound
            self._prefills.append(pending)
            return
        self._start(pending)
        self._prefilled(pending, self._forward_prompt(pending, n))  # reused < n: work to do

    def _start(self, pending: _Prefill) -> None:
        """Start ``pending`` from its prompt's longest cached prefix."""
        tokens = pending.row.input_ids
        reused, kv = self.prefix.match(tokens, limit=len(tokens) - 1) if self.prefix.max_bytes \
            else (0, None)
        if reused:
            pending.cache = DynamicCache(ddp_cache_data=[(k[:, :, :reused], v[:, :, :reused])
                                                         for k, v in (kv or [])])
        else:
            pending.cache = DynamicCache(config=self.model.config)
        pending.reused = pending.done = reused

    def _prefill_chunk(self, pending: _Prefill) -> None:
        """The next chunk of the first queued long prompt; at its end the row starts decoding."""
        row = pending.row
        if row.cancelled.is_set():
            self._prefills.popleft()
            return
        if pending.cache is None:  # its turn has come
            self._start(pending)
        logits = self._forward_prompt(pending, pending.done + self.lanes.prefill_chunk)
        if pending.done == len(row.input_ids):
            self._prefills.popleft()
            self._prefilled(pending, logits)

    def _forward_prompt(self, pending: _Prefill, until: int) -> Any:
        """Compute the prompt's KV from ``pending.done`` up to ``until``; the last logits."""
        tokens = pending.row.input_ids
        end = min(len(tokens), until)
        ids = torch.tensor([tokens[pending.done:end]], device=self.device)
        positions = torch.arange(pending.done, end, device=self.device).unsqueeze(0)
        mask = torch.ones((1, end), dtype=torch.long, device=self.device)
        with torch.inference_mode():
            # logits_to_keep=1: the LM head for the last position only (the stored mark must
            # not hold a [positions, vocab] tensor alive either)
            logits = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                                cache=pending.cache, use_cache=True,
                                logits_to_keep=1).logits[:, -1, :]
        pending.done = end
        return logits

    def _prefilled(self, pending: _Prefill, logits: Any) -> None:
        row, n = pending.row, len(pending.row.input_ids)
        layers = [(layer.keys, layer.values)  # type: ignore[union-attr]
                  for layer in pending.cache.layers]
        self._remember(row.input_ids, layers, logits)
        self.stats.prefilled_tokens += n - pending.reused
        self._ready(self._batch_for(n), row, layers, logits, n)

    def _batch_for(self, prompt_tokens: int) -> _Batch:
        """The lane a prompt of this length decodes in."""
        return self._long if prompt_tokens > self.long_prompt_tokens else self._short

    def _ready(self, batch: _Batch, row: _Row, layers: KV, logits: Any, n: int) -> None:
        """The row's prompt is in ``layers``: it starts decoding in ``batch``."""
        self.stats.requests += 1
        self.stats.prompt_tokens += n
        row.kv_tokens = list(row.input_ids)
        row.generator = self._generator(row.request.seed)
        batch.join(row, layers, torch.ones((1, n), dtype=torch.long, device=self.device), logits)

    def _decode_step(self, batch: _Batch) -> None:
        rows = batch.rows
        next_ids = self._sample(rows, batch.logits)
        for row, token in zip(rows, next_ids, strict=True):
            self._advance(row, token)
        self.stats.decode_steps += 1
        self.stats.decode_rows += len(rows)
        keep = [i for i, r in enumerate(rows) if not r.finished]
        for i, row in enumerate(rows):
            if row.finished:
                self._release(batch, i, row)
        if len(keep) < len(rows):
            batch.select(keep)
        if not batch.rows:
            return
        step = torch.tensor([[next_ids[i]] for i in keep], device=self.device)
        positions = torch.tensor([[len(r.kv_tokens)] for r in batch.rows], device=self.device)
        batch.mask = torch.cat([batch.mask, torch.ones_like(step)], dim=-1)
        with torch.inference_mode():
            batch.logits = self.model(input_ids=step, attention_mask=batch.mask,
                                      position_ids=positions, cache=batch.cache,
                                      use_cache=True).logits[:, -1, :]
        for row, i in zip(batch.rows, keep, strict=True):
            row.kv_tokens.append(next_ids[i])

    def _release(self, batch: _Batch, index: int, row: _Row) -> None:
        """Keep a finished row's KV (prompt + generated) for the session's next turn."""
        if row.cancelled.is_set() or not self.prefix.max_bytes:
            return
        n = len(row.kv_tokens)
        layers = [(layer.keys[index:index + 1, :, -n:].clone(),
                   layer.values[index:index + 1, :, -n:].clone())
                  for layer in batch.cache.layers]
        self._remember(row.kv_tokens, layers)

    def _remember(self, tokens: list[int], layers: KV, logits: Any = None) -> None:
        """Keep ``tokens``' KV; with ``logits`` (those after the last token) as a mark."""
        if self.prefix.max_bytes:
            nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size()
                         for k, v in layers)
            mark = None if logits is None else (logits, logits.numel() * logits.element_size())
            self.prefix.put(tokens, layers, nbytes, mark)

    def _generator(self, seed: int | None) -> Any:
        g = torch.Generator(device=self.device)
        g.manual_seed(seed if seed is not None else secrets.randbits(63))
        return g

    def _sample(self, rows: list[_Row], logits: Any) -> list[int]:
        """The next token of every row: greedy rows by argmax, the others drawn with their own
        seeded generator (one softmax for the whole batch)."""
        greedy = logits.argmax(-1).tolist()
        temps = [r.request.temperature for r in rows]
        if self.copy_bias is not None:
            for i, row in enumerate(rows):
                if temps[i] <= 0 and row.copies:
                    greedy[i] = self._copy_biased(row, logits[i], int(greedy[i]),
                                                  self.copy_bias)
        if all(t <= 0 for t in temps):
            return [int(g) for g in greedy]
        scale = torch.tensor([t if t > 0 else 1.0 for t in temps],
                             device=logits.device).unsqueeze(-1)
        probs = torch.softmax(logits.float() / scale, dim=-1)
        out = []
        for i, row in enumerate(rows):
            if temps[i] <= 0:
                out.append(int(greedy[i]))
                continue
            p = probs[i]
            if row.request.top_p < 1.0:
                sorted_p, order = p.sort(descending=True)
                keep = sorted_p.cumsum(-1) - sorted_p < row.request.top_p
                p = torch.zeros_like(p).scatter(-1, order, sorted_p * keep)
            out.append(int(torch.multinomial(p, 1, generator=row.generator)))
        return out

    def _copy_biased(self, row: _Row, logits: Any, greedy: int, bias: copying.CopyBias) -> int:
        if row.prompt_array is None:
            row.prompt_array = np.asarray(row.input_ids, dtype=np.int64)
        return copying.next_token(logits, row.prompt_array, row.generated, bias, self._marks,
                                  greedy)

    def _advance(self, row: _Row, token: int) -> None:
        if row.cancelled.is_set():
            row.finished = True
            return
        if token in self.eos_ids:
            if len(row.generated) > row.sent_tokens:
                self._flush(row, self._text(row))
            self._finish(row, "stop")
            return
        row.generated.append(token)
        self.stats.generated_tokens += 1
        due = (len(row.generated) <= EAGER_TOKENS or token in self._tag_ends
               or time.monotonic() - row.sent_at >= self.stream_interval_s)
        last = len(row.generated) >= row.request.max_tokens
        if not (row.request.stop or due or last):
            return  # nothing to check or send yet: skip decoding the text
        text = self._text(row)
        for stop in row.request.stop:
            at = text.find(stop)
            if at != -1:
                self._flush(row, text[:at])
                self._finish(row, "stop")
                return
        if last:
            self._flush(row, text)
            self._finish(row, "length")
            return
        if due and not text.endswith("\ufffd"):  # an incomplete UTF-8 sequence waits
            self._flush(row, text)

    def _text(self, row: _Row) -> str:
        return str(self.tokenizer.decode(row.generated, skip_special_tokens=True))

    def _flush(self, row: _Row, text: str) -> None:
        if len(text) > len(row.sent_text) and text.startswith(row.sent_text):
            delta = text[len(row.sent_text):]
            row.sink(Delta(delta, len(row.input_ids), len(row.generated) - row.sent_tokens))
            row.sent_text, row.sent_tokens = text, len(row.generated)
            row.sent_at = time.monotonic()

    def _finish(self, row: _Row, reason: str) -> None:
        row.finished = True
        row.sink(Delta("", len(row.input_ids), len(row.generated) - row.sent_tokens, reason))


def _left_pad(t: Any, n: int) -> Any:
    """``t`` with ``n`` zero columns before its position axis (dim 2 of KV, dim 1 of masks)."""
    if n == 0:
        return t
    dim = 2 if t.dim() == 4 else 1
    shape = list(t.shape)
    shape[dim] = n
    return torch.cat([t.new_zeros(shape), t], dim=dim)
