"""Bundled Redis (AOF) and PostgreSQL for machines where none runs (docs/ARCHITECTURE.md §6)."""

from __future__ import annotations

import socket
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


def test_a_crashed_child_is_restarted_with_backoff(tmp_path: Path) -> None:
    """`worldserve up` keeps the stack running: a killed child comes back after its delay, and
    crashes in a row double the delay."""
    import os
    import signal
    import time

    from worldserve.dev.launcher import RestartPolicy, spawn, supervise

    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(600)\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    policy = RestartPolicy(base_s=0.2, max_s=1.0, stable_s=60.0)
    assert [RestartPolicy().delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    children = [spawn("sleeper", "sleeper", env, tmp_path / "logs")]
    try:
        for crash, delay in ((1, 0.2), (2, 0.4), (3, 0.8)):
            first = children[0]
            assert first.alive()
            os.kill(first.process.pid, signal.SIGKILL)
            first.process.wait(10)
            now = time.monotonic()
            (event,) = supervise(children, now, policy)
            assert "sleeper exited with code -9" in event and f"crash {crash} in a row" in event
            assert f"restarting in {delay:g}s" in event
            assert supervise(children, now + delay / 2, policy) == []  # not yet
            (event,) = supervise(children, now + delay, policy)
            assert event.startswith("sleeper restarted")
            assert children[0] is not first and children[0].alive()
            assert children[0].failures == crash
    finally:
        for child in children:
            child.stop(5)


def test_ports_for_children_lie_below_the_kernels_ephemeral_range() -> None:
    """An outgoing connection can take a port that bind(0) chose before the child binds it;
    free_port draws below that range, never the same port twice, and only ports free now."""
    from worldserve.dev.services import _ephemeral_range, free_port

    low, _ = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(1024 <= p < low for p in ports)
    for p in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))  # still free


def test_a_model_server_on_a_taken_port_says_which_at_once(tmp_path: Path) -> None:
    """Triton exits on a port in use and pytriton would wait two minutes saying "timed out"."""
    from worldserve.dev.launcher import settings_env, spawn
    from worldserve.dev.services import free_port

    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        held.listen()
        taken = held.getsockname()[1]
        model = Settings(triton_url=f"127.0.0.1:{free_port()}", triton_http_port=free_port(),
                         triton_metrics_port=taken)
        child = spawn("modelserver", "worldserve.modelserver.main", settings_env(model), tmp_path)
        try:
            assert child.process.wait(timeout=60) != 0
        finally:
            child.stop(5)
    assert f"port already in use on 127.0.0.1: triton_metrics_port={taken}" in child.tail()
