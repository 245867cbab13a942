"""Start the whole local stack as child processes and stop it cleanly.

Each server runs in its own process group, so stopping one also stops what it spawned
(PyTriton's ``tritonserver`` and its Python-backend stubs).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from worldserve.dev.services import Services, port_open, resolve_services
from worldserve.settings import Settings


class StackError(RuntimeError):
    pass


def settings_env(settings: Settings, **overrides: str) -> dict[str, str]:
    """The environment for a child process: ours, plus every setting as WORLDSERVE_* (None as
    "none", so that a limit switched off stays off where its default is on)."""
    env = dict(os.environ)
    for name, value in settings.model_dump().items():
        if value is None:
            text = "none"
        else:
            text = json.dumps(value) if isinstance(value, list | dict) else str(value)
        env[f"WORLDSERVE_{name.upper()}"] = text
    env.update(overrides)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    module: str = ""
    env: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    failures: int = 0  # crashes in a row (reset once it has run for RestartPolicy.stable_s)
    restart_at: float | None = None  # when a crashed child is due to be started again
    args: tuple[str, ...] = ()
    python: str = sys.executable

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace_s: float) -> None:
        if not self.alive():
            return
        pgid = os.getpgid(self.process.pid)
        os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.process.wait(5)
        # Triton may outlive its parent for a moment: make sure the group is gone.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def spawn(name: str, module: str, env: dict[str, str], log_dir: Path, append: bool = False,
          args: tuple[str, ...] = (), python: str = sys.executable) -> Child:
    """``python -m module args`` in its own process group, logging to ``log_dir/name.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    with open(log_path, "ab" if append else "wb") as log:
        process = subprocess.Popen([python, "-m", module, *args], env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return Child(name, process, log_path, module, env, args=args, python=python)


def openenv_interpreter(settings: Settings) -> str | None:
    """The interpreter that has ``openenv``: this one, the configured one, or .venv-openenv's."""
    import importlib.util

    if importlib.util.find_spec("openenv") is not None:
        return sys.executable
    for candidate in (settings.openenv_python, ".venv-openenv/bin/python"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def openai_server_ready(url: str, model: str) -> bool:
    import httpx

    try:
        models = httpx.get(f"{url.rstrip('/')}/v1/models", timeout=2)
        return any(m.get("id") == model for m in models.json().get("data", []))
    except (httpx.HTTPError, ValueError):
        return False


def start_transformers_serve(model: str, url: str, log_dir: Path,
                             env: dict[str, str] | None = None,
                             tick: Callable[[str], None] | None = None) -> Child:
    """`transformers serve MODEL` (transformers' OpenAI-compatible server) on ``url``'s host and
    port, returned once ``/v1/models`` lists the model."""
    host, port = url.split("://", 1)[-1].rstrip("/").rsplit(":", 1)
    child = spawn("openai-server", "transformers.cli.transformers", env or dict(os.environ),
                  log_dir, args=("serve", model, "--host", host, "--port", port))
    try:
        wait_for("loading the world model into transformers serve",
                 lambda: openai_server_ready(url, model), child, 600, tick)
    except BaseException:
        child.stop(5)
        raise
    return child


@dataclass(frozen=True)
class RestartPolicy:
    """How `worldserve up` restarts a crashed child: after 1 s, 2 s, 4 s … at most 30 s; a
    child that ran for a minute before it crashed starts again from 1 s."""

    base_s: float = 1.0
    max_s: float = 30.0
    stable_s: float = 60.0

    def delay(self, failures: int) -> float:
        return min(self.max_s, self.base_s * 2 ** max(0, failures - 1))


def supervise(children: list[Child], now: float, policy: RestartPolicy = RestartPolicy()
              ) -> list[str]:
    """Restart crashed children in place, with backoff; what happened, one line each."""
    events = []
    for i, child in enumerate(children):
        if child.alive() or not child.module:
            continue
        if child.restart_at is None:
            ran = now - child.started
            child.failures = 1 if ran >= policy.stable_s else child.failures + 1
            child.restart_at = now + policy.delay(child.failures)
            events.append(f"{child.name} exited with code {child.process.returncode} after "
                          f"{ran:.0f}s; restarting in {policy.delay(child.failures):g}s "
                          f"(crash {child.failures} in a row; log {child.log_path})")
        elif now >= child.restart_at:
            fresh = spawn(child.name, child.module, child.env, child.log_path.parent,
                          append=True, args=child.args, python=child.python)
            fresh.failures = child.failures
            children[i] = fresh
            events.append(f"{child.name} restarted (pid {fresh.process.pid})")
    return events


def triton_model_ready(url: str, model: str) -> bool:
    import tritonclient.grpc as triton

    try:
        client = triton.InferenceServerClient(url)
        try:
            return bool(client.is_server_ready() and client.is_model_ready(model))
        finally:
            client.close()
    except Exception:
        return False


def wait_for(what: str, ready: Callable[[], bool], child: Child, timeout_s: float,
             tick: Callable[[str], None] | None = None) -> None:
    start = time.monotonic()
    while not ready():
        if not child.alive():
            raise StackError(f"{child.name} exited while {what}:\n{child.tail()}")
        elapsed = time.monotonic() - start
        if elapsed > timeout_s:
            raise StackError(f"{child.name} not ready after {timeout_s:.0f}s:\n{child.tail()}")
        if tick:
            tick(f"{what} ({elapsed:.0f}s)")
        time.sleep(0.25)


@dataclass
class Stack:
    settings: Settings
    state_dir: Path
    services: Services | None = None
    children: list[Child] = field(default_factory=list)

    @property
    def gateway_target(self) -> str:
        return f"{self.settings.gateway_host}:{self.settings.gateway_port}"

    def start(self, tick: Callable[[str], None] | None = None, need_postgres: bool = True) -> None:
        s = self.settings
        try:
            model_ports = ((int(s.openai_url.rstrip("/").rsplit(":", 1)[1]),)
                           if s.backend_protocol == "openai" else
                           (int(s.triton_url.rsplit(":", 1)[1]), s.triton_http_port,
                            s.triton_metrics_port))
            for port in (s.gateway_port, *model_ports):
                if port_open("127.0.0.1", port):
                    raise StackError(f"port {port} is already in use: is another stack running? "
                                     "Stop it, or set WORLDSERVE_*_PORT to free ports.")
            if tick:
                tick("finding or starting Redis and PostgreSQL")
            self.services = resolve_services(s, self.state_dir, need_postgres)
            env = settings_env(s, WORLDSERVE_REDIS_URL=self.services.redis_url)
            logs = self.state_dir / "logs"
            if self.services.database_url:
                from worldserve.db.bootstrap import bootstrap

                if tick:
                    tick("migrating the database, registering the dev tenant and keys")
                bootstrap(self.services.database_url, s)
                env["WORLDSERVE_DATABASE_URL"] = self.services.database_url
                self.children.append(spawn("worker", "worldserve.accounting.worker", env, logs))
            if s.backend_protocol == "openai":  # an OpenAI-compatible server instead of Triton
                self.children.append(start_transformers_serve(
                    s.openai_model or str(s.model_dir), s.openai_url, logs, env, tick))
            else:
                model = spawn("modelserver", "worldserve.modelserver.main", env, logs)
                self.children.append(model)
                wait_for("loading the world model into Triton",
                         lambda: triton_model_ready(s.triton_url, s.model_name), model, 600,
                         tick)
            gateway = spawn("gateway", "worldserve.gateway.server", env, logs)
            self.children.append(gateway)
            wait_for("starting the gateway",
                     lambda: port_open(s.gateway_host, s.gateway_port), gateway, 60, tick)
            self._start_front_doors(env, logs, tick)
        except BaseException:
            self.stop()
            raise

    def _start_front_doors(self, env: dict[str, str], logs: Path,
                           tick: Callable[[str], None] | None) -> None:
        """The simulated MCP server and, where its environment exists, the OpenEnv server."""
        s = self.settings
        doors = [("mcp", "worldserve.frontends.mcp", s.mcp_host, s.mcp_port, sys.executable)]
        python = openenv_interpreter(s)
        if python is not None:
            doors.append(("openenv", "worldserve.frontends.openenv", s.openenv_host,
                          s.openenv_port, python))
        for name, module, host, port, interpreter in doors:
            if port_open(host, port):
                raise StackError(f"port {port} ({name}) is already in use: set "
                                 f"WORLDSERVE_{name.upper()}_PORT to a free port")
            child = spawn(name, module, env, logs, python=interpreter)
            self.children.append(child)
            wait_for(f"starting the {name} server", functools.partial(port_open, host, port),
                     child, 90, tick)

    @property
    def front_doors(self) -> list[tuple[str, str]]:
        """(name, URL) of each running front door."""
        s = self.settings
        urls = {"mcp": f"http://{s.mcp_host}:{s.mcp_port}/sessions/{{session_id}}/mcp",
                "openenv": f"http://{s.openenv_host}:{s.openenv_port} (ws: /ws)"}
        return [(c.name, urls[c.name]) for c in self.children if c.name in urls]

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop(self.settings.grace_period_s + 5)
        self.children.clear()
        if self.services is not None:
            self.services.stop()
            self.services = None
