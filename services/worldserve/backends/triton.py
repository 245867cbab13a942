"""Triton ``ModelStreamInfer`` client speaking the vLLM-backend tensor contract (docs/ARCHITECTURE.md §5)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import grpc
import numpy as np
import tritonclient.grpc.aio as triton_aio
from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE, InferInput, KeepAliveOptions
from tritonclient.utils import InferenceServerException

from worldserve.backends.base import Chunk, Completion
from worldserve.errors import BackendUnavailable, DeadlineExceeded, InvalidArgument
from worldserve.modelserver import contract as c


def _input(name: str, value: Any, datatype: str) -> InferInput:
    array = np.array([value], dtype=object if datatype == "BYTES" else np.bool_)
    tensor = InferInput(name, [1], datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def build_inputs(request: Completion) -> list[InferInput]:
    sampling = c.sampling_json(request.max_tokens, request.temperature, request.top_p,
                               request.seed)
    return [
        _input(c.TEXT_INPUT, request.prompt.encode("utf-8"), "BYTES"),
        _input(c.STREAM, True, "BOOL"),
        _input(c.SAMPLING_PARAMETERS, sampling.encode(), "BYTES"),
        _input(c.EXCLUDE_INPUT, True, "BOOL"),
        _input(c.RETURN_NUM_INPUT, True, "BOOL"),
        _input(c.RETURN_NUM_OUTPUT, True, "BOOL"),
        _input(c.RETURN_FINISH_REASON, True, "BOOL"),
    ]


def _scalar(result: Any, name: str, outputs: set[str]) -> Any:
    if name not in outputs:
        return None
    return result.as_numpy(name).reshape(-1)[0]


RECONNECT_BACKOFF_MS = 250  # first retry of a lost connection
MAX_RECONNECT_BACKOFF_MS = 1000  # gRPC's default grows to 120 s: a server back after an outage
# would then wait out the last backoff (12 s after a 30 s outage, 31 s after 90 s).


def channel_args() -> list[tuple[str, int]]:
    """tritonclient's own channel options, with reconnect backoff capped at one second."""
    keepalive = KeepAliveOptions()
    return [
        ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
        ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
        ("grpc.keepalive_time_ms", keepalive.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keepalive.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", int(keepalive.keepalive_permit_without_calls)),
        ("grpc.http2.max_pings_without_data", keepalive.http2_max_pings_without_data),
        ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
        ("grpc.min_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
        ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
    ]


class TritonBackend:
    def __init__(self, url: str, model_name: str) -> None:
        self.url = url
        self.model_name = model_name
        self._client: triton_aio.InferenceServerClient | None = None

    def _get(self) -> triton_aio.InferenceServerClient:
        if self._client is None:  # created inside the running loop, on first use
            self._client = triton_aio.InferenceServerClient(self.url,
                                                            channel_args=channel_args())
        return self._client

    async def ready(self) -> bool:
        try:
            return bool(await self._get().is_model_ready(self.model_name))
        except InferenceServerException:
            return False

    async def stream(self, request: Completion, timeout_s: float) -> AsyncGenerator[Chunk, None]:
        inputs = build_inputs(request)

        async def requests() -> AsyncIterator[dict[str, Any]]:
            yield {"model_name": self.model_name, "inputs": inputs,
                   "enable_empty_final_response": True}

        responses = self._get().stream_infer(requests(), stream_timeout=timeout_s)
        try:
            async for result, error in responses:
                if error is not None:
                    raise _translate(error)
                response = result.get_response()
                outputs = {o.name for o in response.outputs}
                if c.TEXT_OUTPUT in outputs:
                    text = _scalar(result, c.TEXT_OUTPUT, outputs)
                    finish = _scalar(result, c.FINISH_REASON, outputs)
                    yield Chunk(
                        text.decode("utf-8") if isinstance(text, bytes) else str(text),
                        int(_scalar(result, c.NUM_INPUT_TOKENS, outputs) or 0),
                        int(_scalar(result, c.NUM_OUTPUT_TOKENS, outputs) or 0),
                        finish.decode() if isinstance(finish, bytes) else (finish or ""),
                    )
                final = response.parameters.get("triton_final_response")
                if final is not None and final.bool_param:
                    return
        except InferenceServerException as exc:
            raise _translate(exc) from exc
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise DeadlineExceeded("model backend did not finish before the deadline") from exc
            raise BackendUnavailable(f"model backend unreachable: {exc.code().name} "
                                     f"{exc.details()}") from exc
        except TimeoutError as exc:
            raise DeadlineExceeded("model backend did not finish before the deadline") from exc
        finally:
            responses.cancel()  # no-op once finished; frees the server's slot if we stop early

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _translate(exc: Any) -> Exception:
    status = str(getattr(exc, "status", lambda: "")() or "")
    message = str(getattr(exc, "message", lambda: str(exc))() or exc)
    if c.CONTEXT_EXCEEDED in message:  # the request's fault, not the replica's: no failover
        return InvalidArgument(message[message.index(c.CONTEXT_EXCEEDED):])
    if "DEADLINE_EXCEEDED" in status:
        return DeadlineExceeded(f"model backend deadline exceeded: {message}")
    return BackendUnavailable(f"model backend failed: {status} {message}".strip())
