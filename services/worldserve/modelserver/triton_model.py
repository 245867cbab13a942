"""Bind an Engine to PyTriton as a decoupled model speaking the vLLM-backend tensor contract.

The gateway cannot tell it from Triton's own vLLM backend: same input and output names, types and
streaming behaviour (one response per text delta, then Triton's final flag).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton

from worldserve.modelserver import contract as c
from worldserve.modelserver.port import Delta, Engine

log = logging.getLogger(__name__)

INPUTS = [
    Tensor(name=c.TEXT_INPUT, dtype=bytes, shape=(1,)),
    Tensor(name=c.STREAM, dtype=np.bool_, shape=(1,), optional=True),
    Tensor(name=c.SAMPLING_PARAMETERS, dtype=bytes, shape=(1,), optional=True),
    *[Tensor(name=n, dtype=np.bool_, shape=(1,), optional=True) for n in c.BOOL_INPUTS[1:]],
]
OUTPUTS = [
    Tensor(name=c.TEXT_OUTPUT, dtype=bytes, shape=(-1,)),
    Tensor(name=c.NUM_INPUT_TOKENS, dtype=np.uint32, shape=(1,)),
    Tensor(name=c.NUM_OUTPUT_TOKENS, dtype=np.uint32, shape=(1,)),
    Tensor(name=c.FINISH_REASON, dtype=bytes, shape=(1,)),
]


def _flag(data: dict[str, np.ndarray], name: str, default: bool) -> bool:
    value = data.get(name)
    return default if value is None else bool(np.asarray(value).reshape(-1)[0])


def _text(data: dict[str, np.ndarray], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    item = np.asarray(value).reshape(-1)[0]
    return item.decode("utf-8") if isinstance(item, bytes) else str(item)


def _response(data: dict[str, np.ndarray], text: str, n_in: int, n_out: int,
              finish: str | None) -> dict[str, np.ndarray]:
    out = {c.TEXT_OUTPUT: np.array([text.encode("utf-8")], dtype=object)}
    if _flag(data, c.RETURN_NUM_INPUT, False):
        out[c.NUM_INPUT_TOKENS] = np.array([n_in], dtype=np.uint32)
    if _flag(data, c.RETURN_NUM_OUTPUT, False):
        out[c.NUM_OUTPUT_TOKENS] = np.array([n_out], dtype=np.uint32)
    if _flag(data, c.RETURN_FINISH_REASON, False):
        out[c.FINISH_REASON] = np.array([(finish or "").encode()], dtype=object)
    return out


def make_infer(engine: Engine, default_max_tokens: int) -> Callable[[list[Any]], AsyncIterator]:
    """An async-generator inference callable for one model instance."""

    async def infer(requests: list[Any]) -> AsyncIterator[list[dict[str, np.ndarray]]]:
        if len(requests) != 1:
            raise ValueError("the world model takes one request per call (batching is internal)")
        data = requests[0].data
        prompt = _text(data, c.TEXT_INPUT) or ""
        request = c.parse_sampling(prompt, _text(data, c.SAMPLING_PARAMETERS), default_max_tokens)
        stream = _flag(data, c.STREAM, False)
        exclude = _flag(data, c.EXCLUDE_INPUT, True)
        loop = asyncio.get_running_loop()
        deltas: asyncio.Queue[Delta] = asyncio.Queue()

        def sink(delta: Delta) -> None:  # called from the engine thread
            loop.call_soon_threadsafe(deltas.put_nowait, delta)

        cancel = engine.submit(request, sink)
        text, n_in, n_out = "" if exclude else prompt, 0, 0
        try:
            while True:
                delta = await deltas.get()
                if delta.error:
                    raise RuntimeError(f"generation failed: {delta.error}")
                n_in, n_out = delta.num_input_tokens, n_out + delta.num_output_tokens
                if stream:
                    if delta.text or delta.finish_reason:
                        yield [_response(data, delta.text, n_in, delta.num_output_tokens,
                                         delta.finish_reason)]
                else:
                    text += delta.text
                if delta.finish_reason:
                    break
            if not stream:
                yield [_response(data, text, n_in, n_out, delta.finish_reason)]
        finally:
            cancel()

    return infer


def bind_world_model(triton: Triton, name: str, engine: Engine, default_max_tokens: int) -> None:
    # One instance: its async callable already serves many requests at once (the engine batches
    # them). Several PyTriton instances race on a handshake socket under CPU load (seen here).
    triton.bind(
        model_name=name,
        infer_func=make_infer(engine, default_max_tokens),
        inputs=INPUTS,
        outputs=OUTPUTS,
        config=ModelConfig(batching=False, decoupled=True),
        strict=False,
    )
