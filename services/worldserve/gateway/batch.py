"""BatchStep: many steps in one call, each with its own status, results in request order.

Steps on different sessions run concurrently; steps on one session run one after another in
request order (so a batch can walk a session forward). With ``commit=False`` every item is a
counterfactual preview — K candidate actions on a session, optionally N samples each — run
concurrently, since nothing is stored.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass

from worldserve.errors import InvalidArgument, ResourceExhausted, WorldserveError
from worldserve.gateway.simulator import Simulator, StepInput, StepResult
from worldserve.observability import metrics


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    request_index: int
    sample: int
    result: StepResult | None = None
    error: WorldserveError | None = None


async def _one(sim: Simulator, tenant: str, index: int, step: StepInput, commit: bool,
               sample: int, timeout_s: float | None) -> BatchOutcome:
    try:
        async for event in sim.step(tenant, step, timeout_s, commit=commit, sample=sample):
            if isinstance(event, StepResult):
                return BatchOutcome(index, sample, result=event)
    except WorldserveError as exc:
        if isinstance(exc, ResourceExhausted):  # per-item: the error interceptor never sees it
            metrics.count_refusal(tenant, exc.subject)
        return BatchOutcome(index, sample, error=exc)
    raise AssertionError("a step always ends with its result")


async def run_batch(sim: Simulator, tenant: str, steps: list[StepInput], commit: bool,
                    samples: int, timeout_s: float | None) -> list[BatchOutcome]:
    limit = sim.settings.max_batch_items
    samples = samples or 1
    if not steps:
        raise InvalidArgument("a batch needs at least one step")
    if samples < 1:
        raise InvalidArgument("samples must be positive")
    if samples > 1 and commit:
        raise InvalidArgument("samples > 1 needs commit=false (a session takes one next turn)")
    if len(steps) * samples > limit:
        raise InvalidArgument(f"a batch may hold at most {limit} items (steps × samples)")
    if not commit:
        return list(await asyncio.gather(*(
            _one(sim, tenant, i, step, False, n, timeout_s)
            for i, step in enumerate(steps) for n in range(samples))))
    by_session: dict[str, list[int]] = defaultdict(list)
    for i, step in enumerate(steps):
        by_session[step.session_id].append(i)

    async def walk(indices: list[int]) -> list[BatchOutcome]:
        return [await _one(sim, tenant, i, steps[i], True, 0, timeout_s) for i in indices]

    outcomes = [o for group in await asyncio.gather(*(walk(ix) for ix in by_session.values()))
                for o in group]
    return sorted(outcomes, key=lambda o: o.request_index)
