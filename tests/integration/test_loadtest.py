"""The Locust load test runs headless against a real gateway and reports every RPC it makes."""

from __future__ import annotations

import asyncio
import csv
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_KEY, repo_root
from tests.integration.backends import EchoBackend
from tests.integration.helpers import running_gateway
from worldserve.settings import Settings

pytestmark = pytest.mark.integration


async def test_locust_headless_run(key_prefix: str, redis_url: str, tmp_path: Path) -> None:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        max_sessions_per_tenant=10_000)
    async with running_gateway(settings, redis_url, EchoBackend()) as gw:
        env = dict(os.environ, WORLDSERVE_API_KEY=TEST_KEY, LOADTEST_SECONDS="8",
                   LOADTEST_STEP_SECONDS="2", LOADTEST_STEP_USERS="2", LOADTEST_MAX_USERS="4")
        locust = Path(sys.executable).parent / "locust"
        proc = await asyncio.create_subprocess_exec(
            str(locust), "-f", str(repo_root() / "loadtests" / "locustfile.py"), "--headless",
            "--host", f"127.0.0.1:{gw.port}", "--csv", str(tmp_path / "run"),
            "--html", str(tmp_path / "run.html"), "--only-summary", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()[-3000:]
    rows = {r["Name"]: r for r in csv.DictReader((tmp_path / "run_stats.csv").open())}
    assert int(rows["Aggregated"]["Request Count"]) > 20
    assert int(rows["Aggregated"]["Failure Count"]) == 0, out.decode()[-3000:]
    for name in ("CreateSession", "Step", "StreamStep", "ForkSession", "BatchStep",
                 "CloseSession"):
        assert int(rows[name]["Request Count"]) > 0, name
    assert (tmp_path / "run.html").stat().st_size > 1000
