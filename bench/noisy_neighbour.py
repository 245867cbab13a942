"""Benchmark: does one session sending maximum-size inputs slow everyone else down? (issue 16)

    .venv/bin/python bench/noisy_neighbour.py [--seconds 40] [--sessions 8]

One real model server (the committed checkpoint, transformers engine) behind one gateway (real
Redis). ``--sessions`` sessions step in a loop (short Terminal actions, 64 tokens each) for
``--seconds`` per phase; their step latencies are the victims' figures. Phases, in one run:

* baseline — nobody else;
* oversize — one more session sends a 16 KiB action (the largest the gateway accepts) and a
  64 KiB current_state in a loop: over the model's 4,096-token context, refused before any model
  time (INVALID_ARGUMENT);
* largest admitted — one more session sends the longest action that still fits the context with
  its max_tokens (prompt ≈ 3,800 tokens), answered in full.

Each attack phase runs between two baseline phases, and its p99 is compared with the p99 of all
baseline samples together, so a drift of this noisy machine during the run shows as one rather
than as the attack's effect. Per phase, the model server's engine counters say where its time
went: milliseconds per batched decode step (and the mean batch), and the long lane's share.

The victims and the attacker are two tenants, each with its own API key (keys from a scratch
PostgreSQL database), so the gateway's pacing of a key's refusals (``--refusals-per-second``,
the deployment default unless given; 0 = none) slows the attacker and not the victims. The
attacker asks again as soon as it is answered, as a misbehaving client would.

Reported: victims' steps, p50 and p99 step latency per phase and p99 / baseline p99. Prints
Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from common import (
    gateway,
    log_dir,
    machine,
    model_server,
    pct,
    redis_url,
    scrape,
    scratch_database,
)

from worldserve.db.repository import Repository, create_engine
from worldserve.errors import InvalidArgument, WorldserveError
from worldserve.sdk import AsyncClient
from worldserve.settings import Settings

ACTIONS = ["ls", "pwd", "cat notes.txt", "wc -l notes.txt", "echo done"]
STATE = "Current directory: /home/agent\nFiles: notes.txt\n--- notes.txt ---\nalpha beta\n"


async def victim(client: AsyncClient, stop: float, latencies: list[float]) -> None:
    session = await client.create_session("terminal", initial_state=STATE, max_tokens=64)
    i = 0
    while time.monotonic() < stop:
        t0 = time.perf_counter()
        try:
            await client.step(session.session_id, ACTIONS[i % len(ACTIONS)])
            latencies.append(time.perf_counter() - t0)
        except WorldserveError:
            pass  # a malformed answer after one retry: not a latency sample
        i += 1


async def attacker(client: AsyncClient, stop: float, action: str, state: str,
                   counts: dict[str, int], reasons: dict[str, int]) -> None:
    """A fresh session per step: in one session the history window would carry the previous
    huge action into the next prompt, which then no longer fits and is refused."""
    while time.monotonic() < stop:
        session = None
        try:
            session = await client.create_session("terminal", initial_state=STATE, max_tokens=64)
            await client.step(session.session_id, action, current_state=state)
            counts["answered"] += 1
        except InvalidArgument:
            counts["refused"] += 1
        except WorldserveError as exc:
            counts["failed"] += 1
            why = f"{exc.code_name}: {str(exc)[:60]}"
            reasons[why] = reasons.get(why, 0) + 1
        finally:
            if session is not None:
                await client.close_session(session.session_id)


async def phase(target: str, keys: tuple[str, str], sessions: int, seconds: float,
                attack: tuple[str, str] | None
                ) -> tuple[list[float], dict[str, int], dict[str, int]]:
    latencies: list[float] = []
    counts = {"answered": 0, "refused": 0, "failed": 0}
    reasons: dict[str, int] = {}
    async with AsyncClient(target, api_key=keys[0]) as client, \
            AsyncClient(target, api_key=keys[1]) as noisy:
        stop = time.monotonic() + seconds
        tasks = [victim(client, stop, latencies) for _ in range(sessions)]
        if attack is not None:
            tasks.append(attacker(noisy, stop, attack[0], attack[1], counts, reasons))
        await asyncio.gather(*tasks)
    return latencies, counts, reasons


async def tenant_keys(database_url: str) -> tuple[str, str]:
    """An API key of the victims' tenant and one of the attacker's."""
    repo = Repository(create_engine(database_url))
    try:
        keys = []
        for tenant in ("victims", "noisy"):
            await repo.ensure_tenant(tenant, tenant)
            keys.append((await repo.create_key(tenant, "tenant", "bench"))[1])
        return keys[0], keys[1]
    finally:
        await repo.aclose()


ATTACKS = {
    "oversize (16 KiB action + 64 KiB state: refused)": ("x " * 8192, "y " * 32768),
    "largest admitted (~3,800-token prompt)": ("ls " + "z " * 1700, ""),
}
ENGINE = ("decode_steps", "decode_rows", "decode_seconds", "prefill_seconds", "long_seconds")


def engine_delta(url: str, before: dict[str, float]) -> dict[str, float]:
    now = scrape(url)
    return {k: now[f"worldserve_engine_{k}_total"] - before.get(f"worldserve_engine_{k}_total", 0)
            for k in ENGINE}


def long_share(engine: dict[str, float]) -> float:
    """The long lane's share of the engine's busy time in a phase."""
    busy = engine["decode_seconds"] + engine["prefill_seconds"]
    return engine["long_seconds"] / busy if busy else 0.0


async def main_async(args: argparse.Namespace) -> None:
    logs = log_dir("noisy")
    rate = (Settings().refusals_per_second_per_key if args.refusals_per_second is None
            else args.refusals_per_second or None)
    engine: dict[str, object] = {}
    if args.long_share is not None:
        engine["engine_long_share"] = args.long_share
    if args.torch_threads is not None:
        engine["torch_threads"] = args.torch_threads
    with scratch_database() as db, model_server(logs, **engine) as ms, \
            gateway(logs, redis_url(), triton_url=ms.url, max_sessions_per_tenant=100,
                    database_url=db, refusals_per_second_per_key=rate) as gw:
        keys = await tenant_keys(db)
        await phase(gw.target, keys, 2, 5, None)  # warm-up
        # each attack between two baselines, so a drift of the machine shows as one
        order: list[tuple[str, tuple[str, str] | None]] = [("baseline", None)]
        for name, attack in ATTACKS.items():
            order += [(name, attack), ("baseline", None)]
        runs = []
        for name, attack in order:
            before = scrape(ms.metrics_url)
            lat, counts, why = await phase(gw.target, keys, args.sessions, args.seconds, attack)
            runs.append((name, lat, counts, why, engine_delta(ms.metrics_url, before)))
    base = [x for name, lat, *_ in runs if name == "baseline" for x in lat]
    base_p99 = pct(base, 0.99)
    print(f"\n{machine()}; {args.sessions} victim sessions, {args.seconds:.0f} s per phase; "
          f"refusals paced to {f'{rate:g}/s per key' if rate else 'none (off)'}; engine "
          f"long-lane share {ms.settings.engine_long_share:g}, torch threads "
          f"{ms.settings.torch_threads or 'auto (usable cores - 1)'}\n")
    print("| phase | victim steps | p50 s | p99 s | p99 / baseline p99 (all baseline phases: "
          f"{base_p99:.2f} s) | engine ms per decode step (rows) | long-lane share of engine "
          "time | attacker answered / refused / failed |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, lat, c, _, e in runs:
        per_step = 1000 * e["decode_seconds"] / max(1, e["decode_steps"])
        rows = e["decode_rows"] / max(1, e["decode_steps"])
        print(f"| {name} | {len(lat)} | {pct(lat, 0.5):.2f} | {pct(lat, 0.99):.2f} | "
              f"{pct(lat, 0.99) / base_p99:.2f} | {per_step:.1f} ({rows:.1f}) | "
              f"{long_share(e):.2f} | {c['answered']} / "
              f"{c['refused']} / {c['failed']} |")
    for name, _, _, why, _ in runs:
        for reason, n in why.items():
            print(f"\nattacker failures, {name}: {reason} × {n}")
    if args.json:
        attacks = {name: {"victim_steps": len(lat), "p99_s": pct(lat, 0.99),
                          "p99_ratio": pct(lat, 0.99) / base_p99, **c,
                          "long_share": long_share(e)}
                   for name, lat, c, _, e in runs if name != "baseline"}
        Path(args.json).write_text(json.dumps({"baseline_p99_s": base_p99,
                                               "baseline_steps": len(base),
                                               "attacks": attacks}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--refusals-per-second", type=float, default=None,
                    help="the gateway's refusal pacing per key (default: the setting's; 0 = off)")
    ap.add_argument("--long-share", type=float, default=None,
                    help="the engine's long-lane share (default: the setting's)")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="the engine's torch threads (default: the setting's)")
    ap.add_argument("--json", help="also write the attack phases' figures to this file")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
