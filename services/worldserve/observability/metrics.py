"""Prometheus metrics of the gateway (served on ``WORLDSERVE_METRICS_PORT``).

Label sets are bounded: tenants and model versions are few per deployment; session ids never
become labels.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

REGISTRY = CollectorRegistry(auto_describe=True)

STEPS = Counter("worldserve_steps_total", "Steps by outcome.",
                ["tenant", "model", "domain", "outcome"], registry=REGISTRY)
STEP_SECONDS = Histogram(
    "worldserve_step_seconds", "Step latency, request to stored turn.", ["model", "domain"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120), registry=REGISTRY)
FIRST_TOKEN_SECONDS = Histogram(
    "worldserve_first_token_seconds", "Time to the first streamed delta.", ["model"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5), registry=REGISTRY)
TOKENS = Counter("worldserve_tokens_total", "Tokens metered, by kind (input/output/reasoning).",
                 ["tenant", "model", "kind"], registry=REGISTRY)
QUOTA_REFUSALS = Counter("worldserve_quota_refusals_total", "RESOURCE_EXHAUSTED answers.",
                         ["tenant", "quota"], registry=REGISTRY)
INFLIGHT = Gauge("worldserve_inflight_steps", "Steps running in this gateway.", ["model"],
                 registry=REGISTRY)
BACKEND_UP = Gauge("worldserve_backend_up", "1 when the model backend answers ready.",
                   registry=REGISTRY)
STORE_UP = Gauge("worldserve_store_up", "1 when Redis answers.", registry=REGISTRY)
REPLICA_ROUTES = Counter(
    "worldserve_replica_routes_total", "Calls served by a replica set, by whether the session's "
    "previous call was served by the same replica (same), another one (moved: its KV cache is "
    "elsewhere) or none seen by this gateway (first).", ["result"], registry=REGISTRY)
RPCS = Counter("worldserve_rpcs_total", "RPCs by method and status code.", ["method", "code"],
               registry=REGISTRY)

PACED_REFUSALS = Counter("worldserve_paced_refusals_total",
                         "Refusals held back because their key was over its refusal rate.",
                         registry=REGISTRY)


def count_refusal(tenant: str, subject: str) -> None:
    """A RESOURCE_EXHAUSTED answer; the quota is the subject's last part (never a session id)."""
    QUOTA_REFUSALS.labels(tenant, subject.rsplit(":", 1)[-1]).inc()


def serve(port: int, host: str = "127.0.0.1") -> None:
    start_http_server(port, addr=host, registry=REGISTRY)
