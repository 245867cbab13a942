"""Server interceptors: authentication, and the one place errors become gRPC statuses.

Both wrap the handler's own coroutine, so they run in the RPC's task: the authenticated tenant
travels in a context variable, and an error raised anywhere below is mapped exactly once.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from worldserve import errors
from worldserve.db.directory import Directory
from worldserve.observability import metrics
from worldserve.observability.tracing import tracer
from worldserve.quota.rate import RefusalPacer
from worldserve.tenancy.keys import Principal

log = logging.getLogger(__name__)

current_tenant: contextvars.ContextVar[str] = contextvars.ContextVar("current_tenant")
current_principal: contextvars.ContextVar[Principal] = contextvars.ContextVar("current_principal")

PUBLIC_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")

def status_code(exc: errors.WorldserveError) -> grpc.StatusCode:
    """The status an error answers with: the one its class names."""
    return grpc.StatusCode[exc.code_name]


def rich_status(exc: errors.WorldserveError) -> status_pb2.Status:
    """A google.rpc.Status with details: QuotaFailure and RetryInfo on RESOURCE_EXHAUSTED."""
    code = status_code(exc)
    message = errors.capped(str(exc))
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=message)
    if isinstance(exc, errors.ResourceExhausted):
        failure = error_details_pb2.QuotaFailure(violations=[
            error_details_pb2.QuotaFailure.Violation(subject=errors.capped(exc.subject),
                                                     description=message)])
        status.details.add().Pack(failure)
        if exc.retry_after_s:
            delay = duration_pb2.Duration()
            delay.FromNanoseconds(round(exc.retry_after_s * 1e9))  # sub-second waits too
            retry = error_details_pb2.RetryInfo(retry_delay=delay)
            status.details.add().Pack(retry)
    return status


def _rewrap(handler: grpc.RpcMethodHandler, wrap: Callable[[Any], Any]) -> grpc.RpcMethodHandler:
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            wrap(handler.unary_unary), handler.request_deserializer, handler.response_serializer)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(
            wrap(handler.unary_stream), handler.request_deserializer, handler.response_serializer)
    return handler  # no client-streaming RPCs in the public API


def _is_streaming(behavior: Any) -> bool:
    return inspect.isasyncgenfunction(behavior)


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """Maps WorldserveError to its status with rich details; anything else is logged, INTERNAL.
    With a pacer, a key's refusals beyond its rate are held before they go back (Admin RPCs
    apart): a client looping on a refused request is slowed to the pacer's rate."""

    def __init__(self, pacer: RefusalPacer | None = None) -> None:
        self._pacer = pacer

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]],
                                details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None:
            return None
        pacer = None if details.method.startswith(ADMIN_PREFIX) else self._pacer
        return _rewrap(handler, lambda behavior: _guard(behavior, pacer))


async def _abort(context: grpc.aio.ServicerContext, exc: Exception,
                 pacer: RefusalPacer | None) -> None:
    if isinstance(exc, errors.ResourceExhausted):
        metrics.count_refusal(current_tenant.get(""), exc.subject)
    if isinstance(exc, errors.WorldserveError):
        principal = current_principal.get(None)
        if pacer is not None and exc.refusal and principal is not None:
            held = pacer.delay(principal.key_id, time.monotonic())
            left = context.time_remaining()
            if left is not None:  # the caller hears its refusal, not DEADLINE_EXCEEDED
                held = min(held, max(left - 0.05, 0.0))
            if held > 0:
                metrics.PACED_REFUSALS.inc()
                await asyncio.sleep(held)
        await context.abort_with_status(rpc_status.to_status(rich_status(exc)))
    log.exception("unhandled error in RPC", exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, "internal error")


def _guard(behavior: Any, pacer: RefusalPacer | None) -> Any:
    if _is_streaming(behavior):
        async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                async for item in behavior(request, context):
                    yield item
            except Exception as exc:
                if isinstance(exc, grpc.aio.AbortError):
                    raise
                await _abort(context, exc, pacer)
        return stream

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behavior(request, context)
        except Exception as exc:
            if isinstance(exc, grpc.aio.AbortError):
                raise
            await _abort(context, exc, pacer)
    return unary


ADMIN_PREFIX = "/worldserve.v1.Admin/"


class ObservabilityInterceptor(grpc.aio.ServerInterceptor):
    """Outermost: one trace span per RPC and the RPC counter by method and status code."""

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]],
                                details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or details.method.startswith(PUBLIC_PREFIXES):
            return handler
        method = details.method.lstrip("/")

        def finish(span: Any, context: grpc.aio.ServicerContext) -> None:
            code = context.code() or grpc.StatusCode.OK
            code = code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.OK
            span.set_attribute("rpc.grpc.status_code", code.value[0])
            if code is not grpc.StatusCode.OK:
                span.set_status(Status(StatusCode.ERROR, code.name))
            metrics.RPCS.labels(method, code.name).inc()

        def wrap(behavior: Any) -> Any:
            if _is_streaming(behavior):
                async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                    with tracer.start_as_current_span(method, kind=SpanKind.SERVER,
                                                      attributes={"rpc.system": "grpc"}) as span:
                        try:
                            async for item in behavior(request, context):
                                yield item
                        finally:
                            finish(span, context)
                return stream

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                with tracer.start_as_current_span(method, kind=SpanKind.SERVER,
                                                  attributes={"rpc.system": "grpc"}) as span:
                    try:
                        return await behavior(request, context)
                    finally:
                        finish(span, context)
            return unary

        return _rewrap(handler, wrap)


def _bearer(details: grpc.HandlerCallDetails) -> str | None:
    headers = [v for k, v in (details.invocation_metadata or ()) if k == "authorization"]
    if len(headers) != 1:  # none, or several: which one is meant is not ours to guess
        return None
    header = headers[0].decode() if isinstance(headers[0], bytes) else headers[0]
    scheme, _, key = header.partition(" ")
    return key.strip() if scheme.lower() == "bearer" and key.strip() else None


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Bearer key → principal (tenant + role) via the directory; Admin RPCs need the admin role.

    The lookup runs inside the handler, so a database outage becomes UNAVAILABLE through the
    error interceptor like any other error.
    """

    def __init__(self, directory: Directory) -> None:
        self._directory = directory

    async def _principal(self, key: str | None, method: str) -> Principal:
        principal = await self._directory.authenticate(key) if key else None
        if principal is None:
            raise errors.Unauthenticated("missing or invalid API key")
        if method.startswith(ADMIN_PREFIX) and not principal.is_admin:
            raise errors.PermissionDenied("the Admin API needs an admin-role key")
        current_tenant.set(principal.tenant)
        current_principal.set(principal)
        trace.get_current_span().set_attribute("worldserve.tenant", principal.tenant)
        return principal

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]],
                                details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or details.method.startswith(PUBLIC_PREFIXES):
            return handler
        key, method = _bearer(details), details.method

        def wrap(behavior: Any) -> Any:
            if _is_streaming(behavior):
                async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                    await self._principal(key, method)
                    async for item in behavior(request, context):
                        yield item
                return stream

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                await self._principal(key, method)
                return await behavior(request, context)
            return unary

        return _rewrap(handler, wrap)
