"""`worldserve eval` end to end: the committed AgentWorldBench-format fixture through a real
gateway (the real model, and scripted ones for malformed output), resume, an LLM judge over
HTTP, and the CLI's reports."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.conftest import TEST_KEY
from tests.integration.backends import BAD, EchoBackend, ScriptedBackend
from tests.integration.helpers import running_gateway
from worldserve.evaluation.dataset import load
from worldserve.evaluation.judge import Judge
from worldserve.evaluation.runner import PREDICTIONS, run
from worldserve.sdk import AsyncClient
from worldserve.settings import DEFAULT_MODEL_DIR, DEFAULT_MODEL_VERSION, Settings

pytestmark = pytest.mark.integration
FIXTURE = DEFAULT_MODEL_DIR / "data" / "agentworldbench"
BIN = Path(sys.executable).parent / "worldserve"


async def test_real_model_run_resumes_without_duplicates(make_settings, redis_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    samples = load(FIXTURE)[:4] + load(FIXTURE)[-4:]  # both domains
    async with running_gateway(make_settings(), redis_url) as gw, \
            AsyncClient(f"127.0.0.1:{gw.port}", api_key=TEST_KEY) as client:
        first = await run(samples[:5], client, DEFAULT_MODEL_VERSION, tmp_path, max_tokens=160)
        assert len(first.rows) == 5 and first.skipped == 0 and not first.failed
        with (tmp_path / PREDICTIONS).open("a") as f:
            f.write('{"id": "cut by a cra')  # an interrupted write
        second = await run(samples, client, DEFAULT_MODEL_VERSION, tmp_path, max_tokens=160)
    assert second.skipped == 5 and len(second.rows) == 8 and not second.failed
    ids = [json.loads(line)["id"] for line in (tmp_path / PREDICTIONS).read_text().splitlines()
           if line.startswith('{"id": "') and line.endswith("}")]
    assert sorted(ids) == sorted(s.sample_id for s in samples)  # each once
    row = second.rows[-1]
    assert row["format_valid"] and row["model_version"] == DEFAULT_MODEL_VERSION
    assert set(row["scores"]) >= {"exact_match", "token_f1", "rouge_l", "format_valid"}


async def test_malformed_answers_count_as_invalid_format(key_prefix, redis_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY)
    async with running_gateway(settings, redis_url, ScriptedBackend([BAD])) as gw, \
            AsyncClient(f"127.0.0.1:{gw.port}", api_key=TEST_KEY) as client:
        result = await run(load(FIXTURE)[:2], client, "", tmp_path)
    assert [r["format_valid"] for r in result.rows] == [False, False]
    assert all(r["scores"]["format_valid"] == 0.0 and r["prediction"] == "" for r in result.rows)


@pytest.fixture
def judge_server() -> Iterator[tuple[str, list[dict[str, object]]]]:
    """A local OpenAI-compatible endpoint that grades everything 4/5 and records requests."""
    seen: list[dict[str, object]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            answer = json.dumps({"choices": [{"message": {"content": json.dumps(
                {"format": 4, "factuality": 4, "consistency": 4, "realism": 4, "quality": 4})}}]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1", seen
    server.shutdown()


async def test_llm_judge_scores_are_normalised(key_prefix, redis_url, tmp_path, judge_server) -> None:  # type: ignore[no-untyped-def]
    url, seen = judge_server
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY)
    async with running_gateway(settings, redis_url, EchoBackend()) as gw, \
            AsyncClient(f"127.0.0.1:{gw.port}", api_key=TEST_KEY) as client:
        result = await run(load(FIXTURE)[:3], client, "", tmp_path,
                           judge=Judge(url, "judge-model", "secret"))
    assert all(r["judge"]["realism"] == 75.0 for r in result.rows)  # (4 - 1) / 4 * 100
    assert len(seen) == 3 and seen[0]["path"] == "/v1/chat/completions"
    assert seen[0]["model"] == "judge-model" and seen[0]["auth"] == "Bearer secret"
    assert "factuality" in json.dumps(seen[0]["messages"])


async def test_eval_cli_writes_reports(key_prefix, redis_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY)
    async with running_gateway(settings, redis_url, EchoBackend()) as gw:
        proc = await asyncio.create_subprocess_exec(
            str(BIN), "eval", "--data", str(FIXTURE),  # no --model: the deployment's default
            "--out", str(tmp_path / "r"), "--limit", "6", "--target", f"127.0.0.1:{gw.port}",
            "--api-key", TEST_KEY, env=dict(os.environ, COLUMNS="160"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["overall"]["n"] == 6 and summary["overall"]["format_valid"] == 1.0
    assert "| overall | 6 |" in (tmp_path / "r" / "report.md").read_text()
    assert (tmp_path / "r" / "report.html").exists()
    proc = await asyncio.create_subprocess_exec(
        str(BIN), "eval", "--data", str(tmp_path), "--model", "m",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    assert proc.returncode == 2 and b"_test.jsonl files in" in out.replace(b"\n", b" ")
