"""Faults survived with real processes: Redis killed and restarted under a running gateway."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import grpc
import pytest

from tests.conftest import TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, running_gateway, stub_for
from worldserve.dev.launcher import Child, settings_env, spawn
from worldserve.dev.services import BundledRedis, port_open
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration


async def spawn_gateway(settings: Settings, redis_url: str, log_dir: Path) -> Child:
    """A gateway in its own process, once its port answers."""
    child = spawn("gateway", "worldserve.gateway.server",
                  settings_env(settings, WORLDSERVE_REDIS_URL=redis_url), log_dir)
    for _ in range(200):
        if port_open("127.0.0.1", settings.gateway_port):
            break
        await asyncio.sleep(0.1)
    return child


async def test_redis_restart_keeps_sessions_and_clients_recover(tmp_path: Path) -> None:
    redis_server = BundledRedis(tmp_path / "redis").start()
    settings = Settings(gateway_port=0, key_prefix="wsrel", dev_api_key=TEST_KEY)
    md = auth(TEST_KEY)
    try:
        async with running_gateway(settings, redis_server.url, EchoBackend()) as gw, \
                stub_for(gw) as stub:
            s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
            await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls",
                                           expected_turn=0), metadata=md)
            await asyncio.sleep(1.2)  # appendfsync everysec: the AOF has the turn
            assert redis_server.process is not None
            redis_server.process.send_signal(signal.SIGKILL)  # a crash, not a clean shutdown
            redis_server.process.wait(10)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd",
                                               expected_turn=1), metadata=md, timeout=10)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
            restarted = time.monotonic()
            redis_server.start()  # same port, same data directory: AOF replay
            for _ in range(100):  # the gateway reconnects by itself
                try:
                    r = await stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd",
                                                       expected_turn=1), metadata=md, timeout=5)
                    break
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE
                    await asyncio.sleep(0.1)
            recovery_s = time.monotonic() - restarted
            assert r.turn == 2  # the turn from before the crash survived
            got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id,
                                                             include_turns=True), metadata=md)
            assert [t.action for t in got.turns] == ["ls", "pwd"]
            print(f"recovered {recovery_s:.2f}s after Redis restarted")
            assert recovery_s < 10
    finally:
        redis_server.stop()


async def test_gateway_sigterm_lets_in_flight_streams_finish(make_settings, redis_url,  # type: ignore[no-untyped-def]
                                                             tmp_path: Path) -> None:
    from worldserve.dev.services import free_port
    from worldserve.v1 import simulator_pb2_grpc as pb_grpc

    settings = make_settings(gateway_port=free_port(), grace_period_s=20.0,
                             default_max_tokens=300, metrics_port=0)
    child = await spawn_gateway(settings, redis_url, tmp_path)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{settings.gateway_port}") as channel:
            stub = pb_grpc.SimulatorStub(channel)
            md = auth(TEST_KEY)
            s = await stub.CreateSession(pb.CreateSessionRequest(
                domain=pb.TERMINAL, initial_state="cwd /home/agent"), metadata=md)
            call = stub.StreamStep(pb.StepRequest(session_id=s.session_id, action="ls -la"),
                                   metadata=md)
            first = await call.read()
            assert first is not grpc.aio.EOF
            stopped = time.monotonic()
            child.process.send_signal(signal.SIGTERM)  # a pod being rolled
            events = [first]
            while (event := await call.read()) is not grpc.aio.EOF:
                events.append(event)
            assert events[-1].WhichOneof("event") == "final"  # the stream finished
            with pytest.raises(grpc.aio.AioRpcError):  # new RPCs are no longer accepted
                await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                         metadata=md, timeout=2)
        assert await asyncio.to_thread(child.process.wait, 30) == 0
        print(f"gateway exited {time.monotonic() - stopped:.2f}s after SIGTERM")
    finally:
        child.stop(5)


@pytest.mark.parametrize("outage_s", [30, 90])
async def test_gateway_serves_within_2s_of_its_model_server_returning(
        redis_url: str, key_prefix: str, tmp_path: Path, outage_s: int) -> None:
    """A real model server (Triton, the committed checkpoint) stopped for 30 s or 90 s while the
    gateway keeps failing steps, then started again on the same port: the untouched gateway
    streams a step's first token within 2 s of the model being ready (gRPC's default reconnect
    backoff took 12 s after 30 s, 31 s after 90 s)."""
    from worldserve.dev.launcher import settings_env, spawn, triton_model_ready, wait_for
    from worldserve.dev.services import free_port

    model = Settings(triton_url=f"127.0.0.1:{free_port()}", triton_http_port=free_port(),
                     triton_metrics_port=free_port())

    def start() -> object:
        child = spawn("modelserver", "worldserve.modelserver.main", settings_env(model), tmp_path)
        wait_for("loading", lambda: triton_model_ready(model.triton_url, model.model_name),
                 child, timeout_s=300)
        return child

    child = await asyncio.to_thread(start)
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        triton_url=model.triton_url, default_max_tokens=200, metrics_port=0)
    md = auth(TEST_KEY)
    try:
        async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
            s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL), metadata=md)
            call = stub.StreamStep(pb.StepRequest(session_id=s.session_id, action="ls"),
                                   metadata=md)
            assert await call.read() is not grpc.aio.EOF  # the model streams
            call.cancel()
            child.stop(5)  # type: ignore[attr-defined]
            down = time.monotonic()
            while time.monotonic() - down < outage_s:  # every step fails, backoff grows
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await stub.Step(pb.StepRequest(session_id=s.session_id, action="pwd"),
                                    metadata=md, timeout=5)
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE
                await asyncio.sleep(1.0)
            child = await asyncio.to_thread(start)  # returns once Triton says the model is ready
            ready = time.monotonic()
            while True:
                call = stub.StreamStep(pb.StepRequest(session_id=s.session_id, action="pwd"),
                                       metadata=md, timeout=5)
                try:
                    first = await call.read()
                    assert first is not grpc.aio.EOF
                    call.cancel()
                    break
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.UNAVAILABLE
                    assert time.monotonic() - ready < 10, "the gateway did not recover"
                    await asyncio.sleep(0.05)
            recovery_s = time.monotonic() - ready
            print(f"served {recovery_s:.2f}s after the model server was ready again")
            assert recovery_s < 2.0
    finally:
        child.stop(5)  # type: ignore[attr-defined]


async def test_a_killed_gateways_slots_are_free_within_15s(make_settings, redis_url,  # type: ignore[no-untyped-def]
                                                          tmp_path: Path) -> None:
    """Every in-flight slot of a tenant held by a gateway that is then SIGKILLed (its streams
    mid-answer): another gateway admits that tenant's steps again within 15 s (the default
    reservation lease, renewed only by a live gateway), not after the client's deadline."""
    from worldserve.dev.services import free_port
    from worldserve.v1 import simulator_pb2_grpc as pb_grpc

    settings = make_settings(gateway_port=free_port(), default_max_tokens=400, metrics_port=0,
                             max_inflight_steps_per_tenant=2)
    child = await spawn_gateway(settings, redis_url, tmp_path)
    md = auth(TEST_KEY)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{settings.gateway_port}") as channel:
            stub = pb_grpc.SimulatorStub(channel)
            calls = []
            for _ in range(2):  # every slot taken, with the client's default-sized deadline
                s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                             metadata=md)
                call = stub.StreamStep(pb.StepRequest(session_id=s.session_id, action="ls -la"),
                                       metadata=md, timeout=300)
                assert await call.read() is not grpc.aio.EOF
                calls.append(call)
            child.process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            child.process.wait(10)
        async with running_gateway(make_settings(max_inflight_steps_per_tenant=2,
                                                 default_max_tokens=200), redis_url) as gw, \
                stub_for(gw) as other:
            s = await other.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                          metadata=md)
            refused = 0
            while True:  # admitted = the step streams (its first event comes after admission)
                call = other.StreamStep(pb.StepRequest(session_id=s.session_id, action="pwd"),
                                        metadata=md, timeout=60)
                try:
                    assert await call.read() is not grpc.aio.EOF
                    call.cancel()
                    break
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc.details()
                    assert "in-flight" in (exc.details() or "")
                    refused += 1
                    assert time.monotonic() - killed < 30, "the dead gateway's slots stayed taken"
                    await asyncio.sleep(0.5)
            freed_s = time.monotonic() - killed
            print(f"slots free {freed_s:.1f}s after the SIGKILL ({refused} steps refused first)")
            assert refused > 0  # the slots really were held by the dead gateway
            assert freed_s < 15
    finally:
        child.stop(5)
