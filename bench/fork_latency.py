"""Benchmark: ForkSession time at 10 and at 1,000 turns of history, in the same run.

    .venv/bin/python bench/fork_latency.py [--forks 300]

A real gateway (in this process, grpc.aio) on the real Redis; the model backend is a stub that
answers instantly, since forking never calls the model. Histories of 10 and 1,000 turns are built
by real steps; then forks of each are timed, interleaved so machine noise hits both alike:

* rpc: ForkSession round trip seen by a gRPC client in the same process;
* core: ``Simulator.fork_session`` inside the gateway (what the gateway itself spends);
* copy baseline: what a fork costs if it copies the turns (LRANGE + RPUSH), for scale.

Prints a Markdown table for docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator

import grpc
import redis.asyncio as aioredis

from worldserve.backends.base import Chunk, Completion
from worldserve.dev.services import resolve_redis_url
from worldserve.gateway.server import build_gateway
from worldserve.keyspace import Keyspace
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc

KEY = "bench-fork-key"
ANSWER = "<think>\nok\n</think>\n\n<predicted_observation>\nok\n</predicted_observation>"


class InstantBackend:
    async def stream(self, request: Completion, timeout_s: float) -> AsyncIterator[Chunk]:
        yield Chunk(ANSWER, 10, 5, "stop")

    async def ready(self) -> bool:
        return True

    async def aclose(self) -> None:
        pass


def ms(values: list[float], q: float = 0.5) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)] * 1000


async def main(forks: int) -> None:
    prefix = f"wsbench-fork-{uuid.uuid4().hex[:6]}"
    settings = Settings(gateway_port=0, key_prefix=prefix, dev_api_key=KEY,
                        max_turns_per_session=2000, max_sessions_per_tenant=100_000,
                        history_window_turns=4)
    redis_url = resolve_redis_url(Settings())
    gw = build_gateway(settings, redis_url, backend=InstantBackend())
    await gw.start()
    md = (("authorization", f"Bearer {KEY}"),)
    r = aioredis.Redis.from_url(redis_url)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{gw.port}") as channel:
            stub = pb_grpc.SimulatorStub(channel)
            parents = {}
            for turns in (10, 1000):
                s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                             metadata=md)
                for i in range(turns):
                    await stub.Step(pb.StepRequest(session_id=s.session_id, action=f"cmd {i}",
                                                   expected_turn=i), metadata=md)
                parents[turns] = s.session_id
            core = gw.simulator
            assert core is not None
            rpc: dict[int, list[float]] = {10: [], 1000: []}
            inner: dict[int, list[float]] = {10: [], 1000: []}
            copy: dict[int, list[float]] = {10: [], 1000: []}
            for _ in range(20):  # warm-up
                for sid in parents.values():
                    await stub.ForkSession(pb.ForkSessionRequest(session_id=sid), metadata=md)
            for _ in range(forks):
                for turns, sid in parents.items():
                    t0 = time.perf_counter()
                    child = await stub.ForkSession(pb.ForkSessionRequest(session_id=sid),
                                                   metadata=md)
                    rpc[turns].append(time.perf_counter() - t0)
                    assert child.turn_count == turns
                    t0 = time.perf_counter()
                    await core.fork_session("dev", sid)
                    inner[turns].append(time.perf_counter() - t0)
                    src = Keyspace(prefix).session("dev", sid).turns
                    dst = f"{prefix}:copy:{uuid.uuid4().hex}"
                    t0 = time.perf_counter()
                    items = await r.lrange(src, 0, -1)
                    await r.rpush(dst, *items)
                    copy[turns].append(time.perf_counter() - t0)
                    await r.delete(dst)
    finally:
        await gw.stop(1.0)
        async for key in r.scan_iter(f"{prefix}:*"):
            await r.delete(key)
        await r.aclose()

    print("| fork of a session with | 10 turns | 1,000 turns | ratio 1000/10 |\n|---|---|---|---|")
    for name, data in (("ForkSession RPC, median", rpc), ("gateway core, median", inner),
                       ("copy-the-turns baseline, median", copy)):
        a, b = ms(data[10]), ms(data[1000])
        print(f"| {name} | {a:.2f} ms | {b:.2f} ms | {b / a:.2f} |")
    a, b = ms(rpc[10], 0.9), ms(rpc[1000], 0.9)
    print(f"| ForkSession RPC, p90 | {a:.2f} ms | {b:.2f} ms | {b / a:.2f} |")
    print(f"\n{forks} forks of each, interleaved; mean RPC "
          f"{statistics.mean(rpc[10]) * 1000:.2f} / {statistics.mean(rpc[1000]) * 1000:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--forks", type=int, default=300)
    asyncio.run(main(parser.parse_args().forks))
