"""Shared pieces of the serving benchmarks: real model servers and gateways as child processes.

Each benchmark starts what it measures as separate processes, as in production: model servers
(real Triton via PyTriton, `python -m worldserve.modelserver.main`) and gateways
(`python -m worldserve.gateway.server`, the dev key, no PostgreSQL), all on the real Redis.
The benchmark process is the client.
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
import statistics
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from worldserve.dev.launcher import Child, settings_env, spawn, triton_model_ready, wait_for
from worldserve.dev.services import (
    free_port,
    port_open,
    resolve_database_url,
    resolve_redis_url,
)
from worldserve.errors import Unavailable
from worldserve.sdk import AsyncClient, StepResult
from worldserve.settings import Settings

KEY = "bench-serving-key"


def machine() -> str:
    """One line describing this machine, for docs/BENCHMARKS.md."""
    import torch

    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kib / 2**20:.0f} GiB RAM"
    return (f"{os.cpu_count()} cores ({cpu}){mem}, no GPU; Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def redis_url() -> str:
    return resolve_redis_url(Settings())


def log_dir(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"wsbench-{name}-"))


@dataclass
class ModelServer:
    child: Child
    settings: Settings

    @property
    def url(self) -> str:
        return self.settings.triton_url

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.engine_metrics_port}"


@contextlib.contextmanager
def model_server(logs: Path, name: str = "modelserver", **overrides: object
                 ) -> Iterator[ModelServer]:
    settings = Settings(triton_url=f"127.0.0.1:{free_port()}", triton_http_port=free_port(),
                        triton_metrics_port=free_port(), engine_metrics_port=free_port(),
                        **overrides)  # type: ignore[arg-type]
    child = spawn(name, "worldserve.modelserver.main", settings_env(settings), logs)
    try:
        wait_for("loading the model", lambda: triton_model_ready(settings.triton_url,
                                                                  settings.model_name),
                 child, timeout_s=300)
        yield ModelServer(child, settings)
    finally:
        child.stop(10)


@dataclass
class Gateway:
    child: Child
    settings: Settings

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.settings.gateway_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.metrics_port}"


@contextlib.contextmanager
def gateway(logs: Path, redis: str, name: str = "gateway", **overrides: object
            ) -> Iterator[Gateway]:
    base: dict[str, object] = {
        "gateway_port": free_port(), "metrics_port": free_port(), "dev_api_key": KEY,
        "key_prefix": f"wsbench-{uuid.uuid4().hex[:8]}", "max_turns_per_session": 10_000,
        "grace_period_s": 2.0,
    }
    base.update(overrides)
    settings = Settings(**base)  # type: ignore[arg-type]
    child = spawn(name, "worldserve.gateway.server",
                  settings_env(settings, WORLDSERVE_REDIS_URL=redis), logs)
    try:
        wait_for("starting the gateway", lambda: port_open("127.0.0.1", settings.gateway_port),
                 child, timeout_s=60)
        yield Gateway(child, settings)
    finally:
        child.stop(5)
        _drop_keys(redis, settings.key_prefix)


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """A new, migrated database on the PostgreSQL the stack would use; dropped afterwards."""
    import psycopg
    from sqlalchemy.engine import make_url

    from worldserve.db import migrate
    from worldserve.db.urls import libpq_url

    server_url = resolve_database_url(Settings())
    name = f"wsbench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
        migrate.upgrade(url)
        yield url
    finally:
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _drop_keys(redis: str, prefix: str) -> None:
    import redis as sync_redis

    client = sync_redis.Redis.from_url(redis)
    try:
        keys = list(client.scan_iter(f"{prefix}:*", count=1000))
        for i in range(0, len(keys), 1000):
            client.delete(*keys[i:i + 1000])
    finally:
        client.close()


def scrape(url: str) -> dict[str, float]:
    """Prometheus samples by name (labels folded into the name as name{k=v,...})."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def diff(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


@dataclass(frozen=True)
class Episode:
    initial_state: str
    actions: list[str]
    observations: list[str]  # what the real shell printed


def terminal_episode(seed: int, turns: int) -> Episode:
    """A real Terminal episode: commands chosen and run in a sandbox as the training collector
    does, so later ones refer to files earlier ones made."""
    from worldserve.training.collect import terminal_episode as play
    from worldserve.training.words import Vocab

    rng = random.Random(seed)
    ep = play(seed, rng, Vocab(rng), worker=0, turns=turns, fault_rate=0.0)
    return Episode(ep.initial_state, [t.action for t in ep.turns],
                   [t.observation for t in ep.turns])


TASK = "Work in the directory."


@dataclass
class StepRecord:
    ttft_s: float  # to the first streamed event
    step_s: float
    input_tokens: int
    output_tokens: int
    prefilled: float = 0.0  # prompt tokens the engine computed (with engine_metrics_url)


async def play_episode(client: AsyncClient, ep: Episode, max_tokens: int,
                       temperature: float = 0.0, seed: int | None = None,
                       engine_metrics_url: str | None = None) -> tuple[list[StepRecord], str]:
    """Stream every action of ``ep`` through the gateway as one session. Returns the steps and
    "" — or the error that ended the episode early (the demo model's answer can fail to parse).
    With ``engine_metrics_url`` (one model server, steps one at a time) each step also records
    the prompt tokens that server prefilled for it; the scrapes are not timed."""
    s = await client.create_session("TERMINAL", task_instruction=TASK,
                                    initial_state=ep.initial_state, temperature=temperature,
                                    max_tokens=max_tokens, seed=seed)
    records: list[StepRecord] = []
    error = ""
    try:
        for turn, action in enumerate(ep.actions):
            before = scrape(engine_metrics_url) if engine_metrics_url else {}
            start = time.perf_counter()
            first: float | None = None
            final: StepResult | None = None
            try:
                async for event in client.stream_step(s.session_id, action, expected_turn=turn):
                    first = first or time.perf_counter()
                    if isinstance(event, StepResult):
                        final = event
            except Unavailable as exc:
                error = str(exc)
                break
            assert final is not None
            end = time.perf_counter()
            record = StepRecord((first or end) - start, end - start, final.usage.input_tokens,
                                final.usage.output_tokens)
            if engine_metrics_url:
                record.prefilled = diff(scrape(engine_metrics_url), before)[
                    "worldserve_engine_prefilled_tokens_total"]
            records.append(record)
    finally:
        await client.close_session(s.session_id)
    return records, error
