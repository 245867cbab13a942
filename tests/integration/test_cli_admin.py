"""`worldserve admin …`, `worldserve usage` and `worldserve db upgrade` as a user runs them,
against a real gateway (PostgreSQL-backed keys and quotas, scripted model)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import sys
from pathlib import Path

import pytest

from tests.integration.backends import GOOD, ScriptedBackend
from tests.integration.helpers import (
    auth,
    db_gateway,
    drain_usage,
    make_admin_key,
    stub_for,
    unique,
)
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent / "worldserve"


async def run_cli(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(str(BIN), *args, env=env,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return int(proc.returncode or 0), out.decode()


async def test_admin_cli_round_trip(key_prefix: str, redis_url: str, database_url: str) -> None:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=None)
    admin_key = await make_admin_key(database_url)
    async with db_gateway(settings, redis_url, database_url, ScriptedBackend([GOOD])) as gw, \
            stub_for(gw) as stub:
        env = dict(os.environ, WORLDSERVE_GATEWAY_PORT=str(gw.port), WORLDSERVE_API_KEY=admin_key,
                   WORLDSERVE_DATABASE_URL=database_url, WORLDSERVE_REDIS_URL=redis_url,
                   WORLDSERVE_KEY_PREFIX=key_prefix, COLUMNS="200")
        tenant = unique("acme")
        code, out = await run_cli(env, "admin", "tenant", "create", tenant, "--name", "Acme")
        assert code == 0 and tenant in out, out
        code, out = await run_cli(env, "admin", "tenant", "create", tenant)
        assert code == 1 and "ALREADY_EXISTS" in out, out
        code, out = await run_cli(env, "admin", "quota", "set", tenant, "--max-sessions", "5",
                                  "--domains", "MCP,terminal", "--format", "json")
        assert code == 0, out
        shown = json.loads(out)[0]
        assert shown["sessions"] == "5" and shown["domains"] == "MCP,TERMINAL"
        assert shown["monthly_budget"] == "default"
        code, out = await run_cli(env, "admin", "quota", "set", tenant, "--monthly-budget",
                                  "100000", "--format", "json")
        shown = json.loads(out)[0]  # earlier settings are kept
        assert shown["sessions"] == "5" and shown["monthly_budget"] == "100000", out
        code, out = await run_cli(env, "admin", "key", "create", "--tenant", tenant, "--format",
                                  "json")
        assert code == 0, out
        made = json.loads(out)[0]
        key = made["secret"]

        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                     metadata=auth(key))
        await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls"), metadata=auth(key))
        drain_usage(redis_url, database_url, key_prefix)

        code, out = await run_cli(env, "usage", "--tenant", tenant, "--by", "domain",
                                  "--format", "csv")
        assert code == 0, out
        rows = list(csv.DictReader(io.StringIO(out)))
        assert rows == [{"domain": "TERMINAL", "steps": "1", "input_tokens": "10",
                         "output_tokens": "4", "reasoning_tokens": rows[0]["reasoning_tokens"],
                         "total_tokens": "14", "faults": "0", "errors": "0"}]
        code, out = await run_cli(env, "usage", "--tenant", tenant, "--by", "week")
        assert code == 1 and "INVALID_ARGUMENT" in out
        code, out = await run_cli(env, "admin", "key", "list", "--tenant", tenant, "--format",
                                  "json")
        listed = json.loads(out)
        assert [k["key_id"] for k in listed] == [made["key_id"]] and "secret" not in listed[0]
        assert listed[0]["last_used"]
        code, out = await run_cli(env, "admin", "tenant", "list", "--api-key", key)
        assert code == 1 and "PERMISSION_DENIED" in out, out
        code, out = await run_cli(env, "admin", "key", "revoke", made["key_id"], "--format",
                                  "json")
        assert code == 0 and json.loads(out)[0]["revoked"], out
        code, out = await run_cli(env, "admin", "models", "--format", "json")
        assert code == 0, out
        assert json.loads(out) == [{"version": settings.model_version_label,
                                    "aliases": f"stable,{settings.model_version_label.split('@')[0]}",
                                    "domains": "TERMINAL,MCP"}]
        code, out = await run_cli(env, "db", "upgrade")
        assert code == 0 and "revision 0001" in out, out
