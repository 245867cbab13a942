"""The Triton vLLM-backend tensor contract (docs/ARCHITECTURE.md §5), as pure data and parsing.

Both sides use it: the model server to declare and read its tensors, the gateway's backend
client to build requests, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TEXT_INPUT = "text_input"
STREAM = "stream"
SAMPLING_PARAMETERS = "sampling_parameters"
EXCLUDE_INPUT = "exclude_input_in_output"
RETURN_NUM_INPUT = "return_num_input_tokens"
RETURN_NUM_OUTPUT = "return_num_output_tokens"
RETURN_FINISH_REASON = "return_finish_reason"
BOOL_INPUTS = (STREAM, EXCLUDE_INPUT, RETURN_NUM_INPUT, RETURN_NUM_OUTPUT, RETURN_FINISH_REASON)

TEXT_OUTPUT = "text_output"
NUM_INPUT_TOKENS = "num_input_tokens"
NUM_OUTPUT_TOKENS = "num_output_tokens"
FINISH_REASON = "finish_reason"


# An error message beginning with this marker: the request does not fit the model's context
# (refused before any model time). The gateway answers INVALID_ARGUMENT with the message.
CONTEXT_EXCEEDED = "context exceeded:"


def context_exceeded(prompt_tokens: int, max_tokens: int, context: int,
                     at_least: bool = False) -> str | None:
    """Why a request does not fit the model's context, or None when it does. ``at_least``:
    ``prompt_tokens`` is a lower bound (counting stopped once it was certainly over)."""
    if prompt_tokens + max_tokens <= context:
        return None
    size = f"at least {prompt_tokens}" if at_least else f"{prompt_tokens}"
    return (f"{CONTEXT_EXCEEDED} the prompt is {size} tokens and max_tokens is "
            f"{max_tokens}: together over the model's context of {context} tokens "
            "(shorten the action or state, or lower max_tokens)")


class BadSamplingParameters(ValueError):
    """sampling_parameters is not a JSON object of valid vLLM SamplingParams values."""


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    prompt: str
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = field(default_factory=tuple)


def parse_sampling(prompt: str, raw: str | bytes | None, default_max_tokens: int = 256
                   ) -> GenerationRequest:
    """A GenerationRequest from the sampling_parameters JSON (vLLM SamplingParams names)."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8")
    try:
        params: dict[str, Any] = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise BadSamplingParameters(f"sampling_parameters is not JSON: {exc}") from exc
    if not isinstance(params, dict):
        raise BadSamplingParameters("sampling_parameters must be a JSON object")
    try:
        max_tokens = int(params.get("max_tokens", default_max_tokens))
        temperature = float(params.get("temperature", 0.0))
        top_p = float(params.get("top_p", 1.0))
        seed = params.get("seed")
        seed = None if seed is None else int(seed)
        stop = params.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
    except (TypeError, ValueError) as exc:
        raise BadSamplingParameters(f"bad sampling value: {exc}") from exc
    if max_tokens < 1:
        raise BadSamplingParameters("max_tokens must be at least 1")
    if temperature < 0 or not 0 < top_p <= 1:
        raise BadSamplingParameters("temperature must be >= 0 and top_p in (0, 1]")
    return GenerationRequest(prompt, max_tokens, temperature, top_p, seed, stop)


def sampling_json(max_tokens: int, temperature: float, top_p: float, seed: int | None) -> str:
    """The sampling_parameters value the gateway sends (always with max_tokens)."""
    params: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p}
    if seed is not None:
        params["seed"] = seed
    return json.dumps(params)
