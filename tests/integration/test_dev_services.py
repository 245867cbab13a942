"""Bundled Redis (AOF) and PostgreSQL for machines where none runs (docs/ARCHITECTURE.md §6)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from worldserve.dev.services import BundledPostgres, BundledRedis, Services, resolve_services
from worldserve.settings import Settings

pytestmark = pytest.mark.integration


def test_bundled_redis_keeps_data_across_a_restart(tmp_path: Path) -> None:
    first = BundledRedis(tmp_path).start()
    try:
        client = redis.Redis.from_url(first.url)
        client.set("k", "v")
        client.close()
    finally:
        first.stop()
    second = BundledRedis(tmp_path).start()
    try:
        client = redis.Redis.from_url(second.url)
        assert client.get("k") == b"v"
        client.close()
    finally:
        second.stop()


def test_bundled_postgres_answers_sql(tmp_path: Path) -> None:
    pg = BundledPostgres(tmp_path / "pg").start()
    try:
        assert pg.url.startswith("postgresql://")
        assert "1" in pg.server.psql("select 1;")
    finally:
        pg.stop()


def test_configured_urls_win_and_nothing_is_started(tmp_path: Path) -> None:
    settings = Settings(redis_url="redis://example.invalid:1/0",
                        database_url="postgresql://u@example.invalid/db")
    services = resolve_services(settings, tmp_path)
    assert isinstance(services, Services) and not services.started
    assert services.redis_url == settings.redis_url
    assert services.database_url == settings.database_url
    assert services.describe() == [("Redis", settings.redis_url, "existing"),
                                   ("PostgreSQL", settings.database_url, "existing")]


def test_bundled_services_are_described_and_stopped(tmp_path: Path) -> None:
    redis_server = BundledRedis(tmp_path / "r").start()
    services = Services(redis_server.url, "postgresql://u@example.invalid/db", [redis_server])
    assert services.describe()[0] == ("Redis", redis_server.url, "bundled")
    assert services.describe()[1][2] == "existing"
    services.stop()
    assert redis_server.process is not None and redis_server.process.poll() is not None
