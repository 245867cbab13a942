"""The gateway follows the operator's Redis registry: weighted new sessions, pinned versions,
aliases, live updates by pub/sub, and a removed version's sessions failing clearly."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import grpc
import redis

from tests.conftest import TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, stub_for
from worldserve.backends.base import Chunk, Completion
from worldserve.gateway.server import build_gateway
from worldserve.routing.choice import Entry
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb
from worldserve_operator.registry import Registry


class Tagged(EchoBackend):
    """Echoes the action, prefixed by the endpoint that served it."""

    def __init__(self, tag: str) -> None:
        super().__init__()
        self.tag = tag

    async def stream(self, request: Completion, timeout_s: float) -> AsyncIterator[Chunk]:
        async for chunk in super().stream(request, timeout_s):
            text = chunk.text.replace("did: ", f"{self.tag} did: ")
            yield Chunk(text, chunk.num_input_tokens, chunk.num_output_tokens,
                        chunk.finish_reason)


def entry(version: str, weight: int) -> dict[str, object]:
    return {"model": "wm", "version": version, "endpoint": f"ep-{version}", "weight": weight,
            "state": "serving", "triton_model": "worldmodel", "chat_template": ""}


async def test_gateway_routes_by_the_registry(redis_url: str) -> None:
    prefix = f"wsreg-{uuid.uuid4().hex[:6]}"
    r = redis.Redis.from_url(redis_url)
    registry = Registry(r, prefix)
    registry.sync("wm", {"wm@v1": entry("v1", 80), "wm@v2": entry("v2", 20)},
                  {"wm:stable": "wm@v1", "wm:canary": "wm@v2"}, now=0, drain_seconds=3600)
    backends: dict[str, Tagged] = {}

    def backend_for(e: Entry) -> Tagged:
        return backends.setdefault(e.endpoint, Tagged(e.endpoint))

    settings = Settings(gateway_port=0, key_prefix=prefix, dev_api_key=TEST_KEY,
                        use_registry=True, max_sessions_per_tenant=10_000)
    md = auth(TEST_KEY)
    try:
        gw = build_gateway(settings, redis_url, backend_for=backend_for)
        await gw.start()
        async with stub_for(gw) as stub:
            sessions = [await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                                 metadata=md) for _ in range(200)]
            split = Counter(s.model_version for s in sessions)
            assert set(split) == {"wm@v1", "wm@v2"} and 120 < split["wm@v1"] < 185
            canary = await stub.CreateSession(pb.CreateSessionRequest(
                domain=pb.TERMINAL, model="wm:canary"), metadata=md)
            assert canary.model_version == "wm@v2"
            v1 = next(s for s in sessions if s.model_version == "wm@v1")
            step = await stub.Step(pb.StepRequest(session_id=v1.session_id, action="ls"),
                                   metadata=md)
            assert step.observation == "ep-v1 did: ls"
            # the operator promotes v2 and drops v1 from the spec: v1 drains
            registry.sync("wm", {"wm@v2": entry("v2", 100)}, {"wm:stable": "wm@v2"}, now=0,
                          drain_seconds=3600)
            for _ in range(50):  # pub/sub reaches the gateway
                if gw.router.view.entries["wm@v1"].state == "draining":  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(0.05)
            fresh = [await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                              metadata=md) for _ in range(20)]
            assert {s.model_version for s in fresh} == {"wm@v2"}
            # a session pinned to the draining version keeps its version
            again = await stub.Step(pb.StepRequest(session_id=v1.session_id, action="pwd"),
                                    metadata=md)
            assert again.observation == "ep-v1 did: pwd" and again.model_version == "wm@v1"
            # once the operator removes it, its sessions fail clearly
            registry.remove(["wm@v1"], "wm")
            for _ in range(50):
                if "wm@v1" not in gw.router.view.entries:  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(0.05)
            try:
                await stub.Step(pb.StepRequest(session_id=v1.session_id, action="x"),
                                metadata=md)
                raise AssertionError("a removed version still served")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAVAILABLE
                assert "no longer served" in (exc.details() or "")
        await gw.stop(1.0)
    finally:
        for key in r.scan_iter(f"{prefix}:*"):
            r.delete(key)
        r.close()


async def test_registry_health_probes_the_serving_versions_backends(redis_url: str) -> None:
    from worldserve.routing.router import RegistryRouter

    prefix = f"wsreg-{uuid.uuid4().hex[:6]}"
    r = redis.Redis.from_url(redis_url)
    Registry(r, prefix).sync("wm", {"wm@v1": entry("v1", 100)}, {}, now=0, drain_seconds=60)
    backend = Tagged("ep-v1")
    up = True

    async def ready() -> bool:
        return up

    backend.ready = ready  # type: ignore[method-assign]
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url)
    router = RegistryRouter(client, prefix, lambda e: backend, "")
    try:
        await router.refresh()
        assert await router.ready()
        up = False  # listed as serving, but its model server does not answer ready
        assert not await router.ready()
    finally:
        await client.aclose()
        for key in r.scan_iter(f"{prefix}:*"):
            r.delete(key)
        r.close()
