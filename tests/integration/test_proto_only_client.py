"""A client generated from protos/ alone (in a separate interpreter, no worldserve code) creates
a TERMINAL session, streams a step and sees each status code of docs/ARCHITECTURE.md §3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_KEY
from tests.integration.helpers import running_gateway
from worldserve.dev.services import free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

CLIENT = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import grpc
from worldserve.v1 import simulator_pb2 as pb, simulator_pb2_grpc as pb_grpc
assert pb.__file__.startswith(sys.argv[1]), pb.__file__  # the freshly generated code
ok_target, limited_target, key = sys.argv[2], sys.argv[3], sys.argv[4]
md = (("authorization", "Bearer " + key),)
out = {}

def code(fn):
    try:
        fn()
        return "OK"
    except grpc.RpcError as e:
        return e.code().name

with grpc.insecure_channel(ok_target) as ch:
    stub = pb_grpc.SimulatorStub(ch)
    s = stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL,
        initial_state="Working directory /tmp/worldserve-sandbox/home/agent contains: a.txt"),
        metadata=md)
    events = list(stub.StreamStep(pb.StepRequest(session_id=s.session_id, action="ls",
                                                 expected_turn=0), metadata=md))
    out["stream_kinds"] = sorted({e.WhichOneof("event") for e in events})
    out["final_turn"] = events[-1].final.turn
    out["UNAUTHENTICATED"] = code(lambda: stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL)))
    out["NOT_FOUND"] = code(lambda: stub.Step(pb.StepRequest(session_id="s_missing", action="ls"), metadata=md))
    out["ABORTED"] = code(lambda: stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd", expected_turn=0), metadata=md))
    out["INVALID_ARGUMENT"] = code(lambda: stub.Step(pb.StepRequest(session_id=s.session_id, action="x" * 20000), metadata=md))
    out["DEADLINE_EXCEEDED"] = code(lambda: stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd"), metadata=md, timeout=0.01))
with grpc.insecure_channel(limited_target) as ch:
    stub = pb_grpc.SimulatorStub(ch)
    out["PERMISSION_DENIED"] = code(lambda: stub.CreateSession(pb.CreateSessionRequest(domain=pb.MCP), metadata=md))
    s2 = stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
    out["RESOURCE_EXHAUSTED"] = code(lambda: stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md))
    out["UNAVAILABLE"] = code(lambda: stub.Step(pb.StepRequest(session_id=s2.session_id, action="ls"), metadata=md))
    stub.CloseSession(pb.CloseSessionRequest(session_id=s2.session_id), metadata=md)
print(json.dumps(out))
'''


async def test_client_generated_from_protos_alone(make_settings, redis_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    gen = tmp_path / "gen"
    gen.mkdir()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'protos'}",
                    f"--python_out={gen}", f"--grpc_python_out={gen}",
                    str(ROOT / "protos/worldserve/v1/simulator.proto")], check=True)
    for pkg in (gen / "worldserve", gen / "worldserve" / "v1"):
        (pkg / "__init__.py").touch()
    limited = make_settings(triton_url=f"127.0.0.1:{free_port()}", allowed_domains=["TERMINAL"],
                            max_sessions_per_tenant=1, dev_tenant="tenant-proto-only")
    async with running_gateway(make_settings(), redis_url) as ok, \
            running_gateway(limited, redis_url) as lim:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLIENT, str(gen), f"127.0.0.1:{ok.port}",
            f"127.0.0.1:{lim.port}", TEST_KEY, cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode == 0, stderr.decode()[-3000:]
    out = json.loads(stdout.decode().strip().splitlines()[-1])
    assert out["final_turn"] == 1
    assert "final" in out["stream_kinds"] and "observation_delta" in out["stream_kinds"]
    for name in ("UNAUTHENTICATED", "NOT_FOUND", "ABORTED", "INVALID_ARGUMENT",
                 "DEADLINE_EXCEEDED", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "UNAVAILABLE"):
        assert out[name] == name, out
