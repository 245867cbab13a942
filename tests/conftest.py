"""Shared fixtures: real Redis (existing or bundled) and a real Triton model server."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from worldserve.settings import Settings

TEST_KEY = "test-key-tenant-a"
OTHER_KEY = "test-key-tenant-b"


def _env_settings() -> Settings:
    return Settings()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from worldserve.dev.services import BundledRedis, resolve_redis_url

    try:
        yield resolve_redis_url(_env_settings())
        return
    except RuntimeError:
        pass
    bundled = BundledRedis(tmp_path_factory.mktemp("redis")).start()
    try:
        yield bundled.url
    finally:
        bundled.stop()


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh, migrated database of this run on a real PostgreSQL (existing or bundled)."""
    import psycopg
    from sqlalchemy.engine import make_url

    from worldserve.db import migrate
    from worldserve.db.urls import libpq_url
    from worldserve.dev.services import BundledPostgres, resolve_database_url

    bundled = None
    try:
        server_url = resolve_database_url(_env_settings())
    except RuntimeError:
        bundled = BundledPostgres(tmp_path_factory.mktemp("postgres")).start()
        server_url = bundled.url
    name = f"wstest_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        yield url
    finally:
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if bundled is not None:
            bundled.stop()


@pytest.fixture(scope="session")
def key_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this run alone; its keys are deleted afterwards."""
    import redis

    prefix = f"wstest-{uuid.uuid4().hex[:8]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


ENGINE_METRICS: dict[str, str] = {}  # triton_url -> the model server's engine metrics URL
MODEL_PORTS: dict[str, tuple[int, ...]] = {}  # triton_url -> every port its model server opens


@pytest.fixture(scope="session")
def triton_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Triton Inference Server (PyTriton) serving the committed checkpoint."""
    from worldserve.dev.launcher import settings_env, spawn, triton_model_ready, wait_for
    from worldserve.dev.services import free_port

    grpc_port, http_port, metrics_port = free_port(), free_port(), free_port()
    settings = Settings(triton_url=f"127.0.0.1:{grpc_port}", triton_http_port=http_port,
                        triton_metrics_port=metrics_port, engine_metrics_port=free_port())
    ENGINE_METRICS[settings.triton_url] = f"http://127.0.0.1:{settings.engine_metrics_port}"
    MODEL_PORTS[settings.triton_url] = (grpc_port, http_port, metrics_port,
                                        settings.engine_metrics_port)
    child = spawn("modelserver", "worldserve.modelserver.main", settings_env(settings),
                  tmp_path_factory.mktemp("logs"))
    try:
        wait_for("loading the model", lambda: triton_model_ready(settings.triton_url,
                                                                  settings.model_name),
                 child, timeout_s=300)
        yield settings.triton_url
    finally:
        child.stop(10)


@pytest.fixture
def make_settings(key_prefix: str, triton_url: str):  # type: ignore[no-untyped-def]
    def make(**overrides: object) -> Settings:
        base: dict[str, object] = {
            "gateway_port": 0, "triton_url": triton_url, "key_prefix": key_prefix,
            "dev_api_key": TEST_KEY, "grace_period_s": 2.0, "default_max_tokens": 200,
        }
        base.update(overrides)
        return Settings(**base)  # type: ignore[arg-type]
    return make


def repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def pytest_report_header(config: pytest.Config) -> str:
    return f"worldserve tests; WORLDSERVE_REDIS_URL={os.environ.get('WORLDSERVE_REDIS_URL', '')}"
