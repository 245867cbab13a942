"""Prometheus metrics of the model server's engine, read from its counters at scrape time.

Triton's own metrics port knows requests and latency but not what the engine does inside a call:
how many prompt tokens came from the prefix cache, how full the batches are. Served on
``engine_metrics_port`` (0 = off).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric


class EngineCollector:
    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        stats = getattr(self.engine, "stats", None)
        prefix = getattr(self.engine, "prefix", None)
        if stats is not None:
            for name, doc, value in (
                ("requests", "Requests admitted to a batch.", stats.requests),
                ("prompt_tokens", "Prompt tokens of admitted requests.", stats.prompt_tokens),
                ("prefilled_tokens", "Prompt tokens computed (not taken from the prefix cache).",
                 stats.prefilled_tokens),
                ("generated_tokens", "Tokens generated.", stats.generated_tokens),
                ("decode_steps", "Batched decode steps.", stats.decode_steps),
                ("decode_rows", "Sum of batch sizes over decode steps.", stats.decode_rows),
                ("prefill_seconds", "Engine time spent prefilling.", stats.prefill_seconds),
                ("decode_seconds", "Engine time spent in decode steps.", stats.decode_seconds),
                ("long_requests", "Requests over the long-prompt bound (their own lane).",
                 stats.long_requests),
                ("long_seconds", "Engine time spent in the long lane.", stats.long_seconds),
            ):
                yield CounterMetricFamily(f"worldserve_engine_{name}", doc, value=value)
        if prefix is not None:
            s = prefix.stats
            for name, doc, value in (
                ("lookups", "Prefix-cache lookups.", s.lookups),
                ("hits", "Lookups that found a cached prefix.", s.hits),
                ("reused_tokens", "Prompt tokens served from the prefix cache.", s.reused_tokens),
                ("evictions", "Entries evicted to stay within the byte bound.", s.evicted),
            ):
                yield CounterMetricFamily(f"worldserve_prefix_cache_{name}", doc, value=value)
            yield GaugeMetricFamily("worldserve_prefix_cache_bytes", "Bytes held by the cache.",
                                    value=prefix.nbytes)
            yield GaugeMetricFamily("worldserve_prefix_cache_entries", "Entries in the cache.",
                                    value=len(prefix))


def serve_engine_metrics(engine: Any, port: int, host: str = "127.0.0.1") -> None:
    registry = CollectorRegistry()
    registry.register(EngineCollector(engine))  # type: ignore[arg-type]
    start_http_server(port, addr=host, registry=registry)
