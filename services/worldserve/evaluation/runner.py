"""Run AgentWorldBench samples through the platform, in parallel, resumable.

Each sample becomes a session whose history is the sample's turns 1..t-1 (ImportTrajectory, with
the sample's own ``system_str``); then turn t's action is stepped and the prediction scored.
Predictions are appended to ``predictions.jsonl`` as they finish; a rerun skips every sample
already there, so an interrupted evaluation resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldserve.errors import Unavailable, WorldserveError
from worldserve.evaluation import metrics
from worldserve.evaluation.dataset import Sample
from worldserve.evaluation.judge import Judge
from worldserve.sdk import AsyncClient, FaultPolicy

PREDICTIONS = "predictions.jsonl"


@dataclass
class RunResult:
    rows: list[dict[str, Any]]
    skipped: int  # already in predictions.jsonl from an earlier run
    failed: list[tuple[str, str]]  # (sample id, error) not written: a rerun retries them


def done_ids(out_dir: Path) -> dict[str, dict[str, Any]]:
    path = out_dir / PREDICTIONS
    rows: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash: the sample is run again
                rows[row["id"]] = row
    return rows


async def _predict(client: AsyncClient, sample: Sample, model: str, max_tokens: int
                   ) -> tuple[str, bool, dict[str, Any]]:
    faults = (FaultPolicy(kinds=(sample.fault_kind,), turns=(sample.turn_idx,))
              if sample.fault_kind else None)  # the reference turn's fault, injected again
    session = await client.import_trajectory(
        json.dumps(sample.history_record).encode(), domain=sample.domain, model=model,
        temperature=0.0, max_tokens=max_tokens, labels={"eval": sample.source}, faults=faults)
    try:
        result = await client.step(session.session_id, sample.action,
                                   expected_turn=sample.turn_idx - 1,
                                   current_state=sample.current_state or None)
        return result.observation, True, {"model_version": result.model_version,
                                          "finish_reason": result.finish_reason,
                                          "output_tokens": result.usage.output_tokens}
    except Unavailable as exc:
        if "usable observation" not in str(exc):
            raise
        return "", False, {"error": str(exc)}  # the model's answer had no observation twice
    finally:
        with contextlib.suppress(WorldserveError):  # already expired: nothing to release
            await client.close_session(session.session_id)


async def run(samples: list[Sample], client: AsyncClient, model: str, out_dir: Path, *,
              concurrency: int = 4, max_tokens: int = 384, judge: Judge | None = None,
              progress: Callable[[int], None] | None = None) -> RunResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = done_ids(out_dir)
    todo = [s for s in samples if s.sample_id not in previous]
    rows = [previous[s.sample_id] for s in samples if s.sample_id in previous]
    failed: list[tuple[str, str]] = []
    gate = asyncio.Semaphore(max(concurrency, 1))
    path = out_dir / PREDICTIONS
    cut = False
    if path.exists() and path.stat().st_size:
        with path.open("rb") as tail:
            tail.seek(-1, 2)
            cut = tail.read(1) != b"\n"
    sink = path.open("a", encoding="utf-8")
    if cut:
        sink.write("\n")  # a line cut by a crash must not swallow the next one

    async def one(sample: Sample) -> None:
        async with gate:
            try:
                predicted, valid, info = await _predict(client, sample, model, max_tokens)
                judged = None
                if judge is not None:
                    judged = await asyncio.to_thread(judge.score, sample.action, predicted,
                                                     sample.reference)
            except Exception as exc:  # recorded, not written: the next run retries it
                failed.append((sample.sample_id, f"{type(exc).__name__}: {exc}"))
                return
            finally:
                if progress:
                    progress(1)
        row = {"id": sample.sample_id, "domain": sample.domain, "turn_idx": sample.turn_idx,
               "source": sample.source, "action": sample.action, "prediction": predicted,
               "reference": sample.reference, "format_valid": valid, **info,
               "category": sample.category, "fault_kind": sample.fault_kind,
               "scores": metrics.score(predicted, sample.reference, valid, sample.fault_kind,
                                       sample.untruncated, sample.domain), "judge": judged}
        sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        sink.flush()
        rows.append(row)

    try:
        await asyncio.gather(*(one(s) for s in todo))
    finally:
        sink.close()
    return RunResult(rows, len(previous), failed)
