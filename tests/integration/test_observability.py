"""Traces (in-memory exporter), Prometheus metrics and JSON logs of a real gateway."""

from __future__ import annotations

import json
import logging
import urllib.request

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.conftest import TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, running_gateway, stub_for
from worldserve.dev.services import free_port
from worldserve.observability import metrics
from worldserve.observability.logs import JsonFormatter, redact
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)


def sample(name: str, **labels: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name, labels)
    return float(value or 0.0)


async def test_a_step_is_traced_gateway_redis_model(key_prefix: str, redis_url: str) -> None:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        dev_tenant="obs")
    before = sample("worldserve_steps_total", tenant="obs", model=settings.model_version_label,
                    domain="TERMINAL", outcome="ok")
    async with running_gateway(settings, redis_url, EchoBackend()) as gw, stub_for(gw) as stub:
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                     metadata=auth(TEST_KEY))
        EXPORTER.clear()
        await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls"),
                        metadata=auth(TEST_KEY))
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetSession(pb.GetSessionRequest(session_id="s_nope"),
                                  metadata=auth(TEST_KEY))
    spans = {s.name: s for s in EXPORTER.get_finished_spans()}
    root = spans["worldserve.v1.Simulator/Step"]
    for child in ("session.load", "quota.reserve", "model.generate", "session.commit"):
        assert spans[child].context.trace_id == root.context.trace_id, child
        assert spans[child].parent is not None
        assert spans[child].parent.span_id == root.context.span_id, child
    assert root.attributes["worldserve.tenant"] == "obs"
    assert root.attributes["rpc.grpc.status_code"] == 0
    failed = spans["worldserve.v1.Simulator/GetSession"]
    assert failed.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    # metrics
    labels = {"tenant": "obs", "model": settings.model_version_label, "domain": "TERMINAL",
              "outcome": "ok"}
    assert sample("worldserve_steps_total", **labels) == before + 1
    assert sample("worldserve_tokens_total", tenant="obs", model=settings.model_version_label,
                  kind="output") >= 3
    assert sample("worldserve_rpcs_total", method="worldserve.v1.Simulator/GetSession",
                  code="NOT_FOUND") >= 1
    assert sample("worldserve_step_seconds_count", model=settings.model_version_label,
                  domain="TERMINAL") >= 1
    assert sample("worldserve_backend_up") == 1.0 and sample("worldserve_store_up") == 1.0


def test_metrics_endpoint_and_json_logs() -> None:
    port = free_port()
    metrics.serve(port, "127.0.0.1")
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert "worldserve_steps_total" in body and "worldserve_step_seconds_bucket" in body
    record = logging.LogRecord("worldserve.test", logging.INFO, __file__, 1,
                               "auth failed for Bearer wsk_abcd1234_secretsecret at %s",
                               ("postgresql://u:pw@db/x",), None)
    with trace.get_tracer("test").start_as_current_span("op") as span:
        line = json.loads(JsonFormatter().format(record))
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert "wsk_abcd" not in line["message"] and "pw@" not in line["message"]
    assert redact("key wsk_00ff_xyz") == "key [redacted]"
