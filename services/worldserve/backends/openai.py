"""An OpenAI-compatible completions server as a backend (vLLM, SGLang, `transformers serve`).

``POST /v1/completions`` with ``stream: true`` and the prompt the gateway rendered itself (the
server applies no chat template), vLLM sampling names (max_tokens, temperature, top_p, seed),
``stream_options.include_usage`` for token counts. Servers that ignore ``stream_options``
(`transformers serve` streams one token per chunk) are metered by counting chunks; their input
tokens are then unknown (0). Output tokens are max(chunks, the usage block's count).
Cancellation closes the stream. Health: ``/health`` answering 200 and ``/v1/models`` listing the
model. docs/ARCHITECTURE.md §5.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from worldserve.backends.base import Chunk, Completion
from worldserve.errors import BackendUnavailable, DeadlineExceeded, InvalidArgument

# Phrases servers use when a prompt does not fit (vLLM: "maximum context length").
_CONTEXT = ("maximum context length", "context length", "too long")


def request_body(model: str, request: Completion) -> dict[str, Any]:
    """The completions request for one gateway call (pure)."""
    body: dict[str, Any] = {
        "model": model, "prompt": request.prompt, "max_tokens": request.max_tokens,
        "temperature": request.temperature, "top_p": request.top_p, "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.seed is not None:
        body["seed"] = request.seed
    return body


def parse_event(line: str) -> dict[str, Any] | None:
    """One server-sent event line as JSON; None for keep-alives, comments and ``[DONE]``."""
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if not data or data == "[DONE]":
        return None
    parsed = json.loads(data)
    return parsed if isinstance(parsed, dict) else None


class OpenAIBackend:
    """One OpenAI-compatible server (``base_url`` like ``http://host:8000``) serving ``model``."""

    def __init__(self, base_url: str, model: str, connect_timeout_s: float = 5.0) -> None:
        base = base_url if "://" in base_url else f"http://{base_url}"  # a registry host:port
        self.base_url = base.rstrip("/")
        self.model = model
        self._client: httpx.AsyncClient | None = None
        self._connect_timeout_s = connect_timeout_s

    def _get(self) -> httpx.AsyncClient:
        if self._client is None:  # created inside the running loop, on first use
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(
                None, connect=self._connect_timeout_s))
        return self._client

    async def ready(self) -> bool:
        try:
            health = await self._get().get("/health", timeout=5)
            models = await self._get().get("/v1/models", timeout=5)
        except httpx.HTTPError:
            return False
        if health.status_code != 200 or models.status_code != 200:
            return False
        return any(m.get("id") == self.model for m in models.json().get("data", []))

    async def stream(self, request: Completion, timeout_s: float) -> AsyncGenerator[Chunk, None]:
        body = request_body(self.model, request)
        counted = 0
        try:
            async with self._get().stream("POST", "/v1/completions", json=body,
                                          timeout=httpx.Timeout(timeout_s,
                                                                connect=self._connect_timeout_s)
                                          ) as response:
                if response.status_code >= 400:
                    raise _refusal(response.status_code, (await response.aread()).decode(
                        "utf-8", "replace"))
                async for line in response.aiter_lines():
                    event = parse_event(line)
                    if event is None:
                        continue
                    usage = event.get("usage") or None
                    for choice in event.get("choices") or ():
                        text = str(choice.get("text") or "")
                        finish = str(choice.get("finish_reason") or "")
                        if text:
                            counted += 1
                        if text or finish:
                            yield Chunk(text, 0, 1 if text else 0, finish)
                    if usage:  # the last event, where include_usage is honoured
                        yield Chunk("", int(usage.get("prompt_tokens") or 0),
                                    max(0, int(usage.get("completion_tokens") or 0) - counted))
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.ConnectTimeout):
                raise BackendUnavailable(f"model backend unreachable: {exc!r}") from exc
            raise DeadlineExceeded("model backend did not finish before the deadline") from exc
        except httpx.HTTPError as exc:
            raise BackendUnavailable(f"model backend unreachable: {exc!r}") from exc

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _refusal(status: int, text: str) -> Exception:
    """An error answer: the request's fault (INVALID_ARGUMENT) or the server's (UNAVAILABLE)."""
    if status == 400 and any(p in text.lower() for p in _CONTEXT):
        return InvalidArgument(f"the model server refused the prompt: {text[:300]}")
    return BackendUnavailable(f"model backend answered HTTP {status}: {text[:300]}")
