"""OpenTelemetry tracing: one span per RPC, child spans for Redis, quota and the model call.

``configure(settings)`` installs an SDK tracer provider with an OTLP exporter when
``WORLDSERVE_OTLP_ENDPOINT`` is set; without one, the API's no-op tracer costs next to nothing.
Tests install their own provider with an in-memory exporter.
"""

from __future__ import annotations

from opentelemetry import trace

from worldserve.settings import Settings

tracer = trace.get_tracer("worldserve")


def configure(settings: Settings) -> None:
    if not settings.otlp_endpoint:
        return
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=settings.otlp_endpoint, insecure=settings.otlp_insecure)))
    trace.set_tracer_provider(provider)


def current_trace_id() -> str:
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
