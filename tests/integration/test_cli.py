"""`worldserve up` then `worldserve demo` as a user runs them; Ctrl-C stops everything."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from worldserve.cli.demo import ACTIONS
from worldserve.dev.services import free_port, port_open

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent / "worldserve"


def test_up_demo_and_ctrl_c(tmp_path: Path, redis_url: str, database_url: str) -> None:
    ports = {name: free_port() for name in ("GATEWAY_PORT", "TRITON_HTTP_PORT",
                                            "TRITON_METRICS_PORT", "GRPC", "MCP_PORT",
                                            "OPENENV_PORT")}
    env = dict(os.environ, WORLDSERVE_GATEWAY_PORT=str(ports["GATEWAY_PORT"]),
               WORLDSERVE_MCP_PORT=str(ports["MCP_PORT"]),
               WORLDSERVE_OPENENV_PORT=str(ports["OPENENV_PORT"]),
               WORLDSERVE_TRITON_HTTP_PORT=str(ports["TRITON_HTTP_PORT"]),
               WORLDSERVE_TRITON_METRICS_PORT=str(ports["TRITON_METRICS_PORT"]),
               WORLDSERVE_TRITON_URL=f"127.0.0.1:{ports['GRPC']}",
               WORLDSERVE_REDIS_URL=redis_url, WORLDSERVE_DATABASE_URL=database_url,
               WORLDSERVE_DEV_API_KEY="cli-test-key", COLUMNS="100")
    log = open(tmp_path / "up.log", "wb")  # noqa: SIM115 - the child writes it while we read
    up = subprocess.Popen([str(BIN), "up", "--state-dir", str(tmp_path / "state")], env=env,
                          stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while "press Ctrl-C" not in (tmp_path / "up.log").read_text(errors="replace"):
            assert up.poll() is None, (tmp_path / "up.log").read_text()
            assert time.monotonic() < deadline, "stack did not come up"
            time.sleep(0.5)
        printed = (tmp_path / "up.log").read_text()
        assert "cli-test-key" in printed and str(ports["GATEWAY_PORT"]) in printed
        # the front doors run too: the simulated MCP server and the OpenEnv server
        assert "mcp front door" in printed and "openenv front door" in printed
        assert httpx.get(f"http://127.0.0.1:{ports['MCP_PORT']}/health").json() == {
            "status": "ok"}
        assert httpx.get(f"http://127.0.0.1:{ports['OPENENV_PORT']}/health").json()[
            "status"] == "healthy"
        demo = subprocess.run([str(BIN), "demo"], env=env, capture_output=True, text=True,
                              timeout=300)
        assert demo.returncode == 0, demo.stdout + demo.stderr
        for n in range(1, len(ACTIONS) + 1):
            assert f"Turn {n}" in demo.stdout
        summary = re.search(r"(\d+) of (\d+) turns exact", demo.stdout)
        assert summary is not None, demo.stdout
        assert int(summary.group(2)) == len(ACTIONS), demo.stdout
        # every turn is marked, and the injected fault was announced on its turn
        marks = demo.stdout.count("✓ exact") + demo.stdout.count("✗ not exact")
        assert marks == len(ACTIONS), demo.stdout
        assert "injected fault: permission_denied" in demo.stdout, demo.stdout
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
        log.close()
    assert up.returncode == 0, (tmp_path / "up.log").read_text()
    assert "stopped" in (tmp_path / "up.log").read_text()
    for port in ports.values():
        assert not port_open("127.0.0.1", port), f"port {port} still open after Ctrl-C"
    leftovers = subprocess.run(["pgrep", "-f", f"grpc-port {ports['GRPC']}"],
                               capture_output=True, text=True)
    assert leftovers.stdout.strip() == "", "tritonserver outlived `worldserve up`"


def test_up_with_the_openai_backend(tmp_path: Path, redis_url: str, database_url: str) -> None:
    """`worldserve up --backend openai` serves the model with `transformers serve` instead of
    Triton; a step goes through it; Ctrl-C stops it too."""
    from worldserve.sdk import Client

    gateway, openai = free_port(), free_port()
    env = dict(os.environ, WORLDSERVE_GATEWAY_PORT=str(gateway),
               WORLDSERVE_MCP_PORT=str(free_port()), WORLDSERVE_OPENENV_PORT=str(free_port()),
               WORLDSERVE_OPENAI_URL=f"http://127.0.0.1:{openai}",
               WORLDSERVE_REDIS_URL=redis_url, WORLDSERVE_DATABASE_URL=database_url,
               WORLDSERVE_DEV_API_KEY="cli-openai-key", WORLDSERVE_METRICS_PORT="0",
               COLUMNS="100")
    log_path = tmp_path / "up.log"
    log = open(log_path, "wb")  # noqa: SIM115 - the child writes it while we read
    up = subprocess.Popen([str(BIN), "up", "--backend", "openai", "--state-dir",
                           str(tmp_path / "state")], env=env, stdout=log,
                          stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while "press Ctrl-C" not in log_path.read_text(errors="replace"):
            assert up.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "stack did not come up"
            time.sleep(0.5)
        assert "OpenAI-compatible server" in log_path.read_text()
        with Client(f"127.0.0.1:{gateway}", api_key="cli-openai-key") as client:
            session = client.create_session("terminal", initial_state="Files: a.txt")
            result = client.step(session.session_id, "ls")
            assert result.turn == 1 and result.usage.output_tokens > 0
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
        log.close()
    assert up.returncode == 0, log_path.read_text()
    for port in (gateway, openai):
        assert not port_open("127.0.0.1", port), f"port {port} still open after Ctrl-C"
