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
import time

from common import gateway, log_dir, machine, model_server, pct, redis_url, scratch_database

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


async def main_async(args: argparse.Namespace) -> None:
    logs = log_dir("noisy")
    rate = (Settings().refusals_per_second_per_key if args.refusals_per_second is None
            else args.refusals_per_second or None)
    with scratch_database() as db, model_server(logs) as ms, \
            gateway(logs, redis_url(), triton_url=ms.url, max_sessions_per_tenant=100,
                    database_url=db, refusals_per_second_per_key=rate) as gw:
        keys = await tenant_keys(db)
        await phase(gw.target, keys, 2, 5, None)  # warm-up
        phases = {
            "baseline": None,
            "oversize (16 KiB action + 64 KiB state: refused)": ("x " * 8192, "y " * 32768),
            "largest admitted (~3,800-token prompt)": ("ls " + "z " * 1700, ""),
        }
        rows = []
        reasons: dict[str, int] = {}
        base_p99 = 0.0
        for name, attack in phases.items():
            lat, counts, why = await phase(gw.target, keys, args.sessions, args.seconds, attack)
            p50, p99 = pct(lat, 0.5), pct(lat, 0.99)
            base_p99 = base_p99 or p99
            rows.append((name, len(lat), p50, p99, p99 / base_p99, counts))
            reasons.update({f"{name}: {k}": v for k, v in why.items()})
    print(f"\n{machine()}; {args.sessions} victim sessions, {args.seconds:.0f} s per phase; "
          f"refusals paced to {f'{rate:g}/s per key' if rate else 'none (off)'}\n")
    print("| phase | victim steps | p50 s | p99 s | p99 / baseline | attacker answered / "
          "refused / failed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, n, p50, p99, ratio, c in rows:
        print(f"| {name} | {n} | {p50:.2f} | {p99:.2f} | {ratio:.2f} | {c['answered']} / "
              f"{c['refused']} / {c['failed']} |")
    for reason, n in reasons.items():
        print(f"\nattacker failures, {reason} × {n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--refusals-per-second", type=float, default=None,
                    help="the gateway's refusal pacing per key (default: the setting's; 0 = off)")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
