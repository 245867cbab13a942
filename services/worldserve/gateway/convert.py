"""protobuf <-> simulator types (pure)."""

from __future__ import annotations

import json

from google.protobuf.timestamp_pb2 import Timestamp

from worldserve.domains.parsing import Part
from worldserve.domains.tools import ToolSpec, parse_schema
from worldserve.errors import InvalidArgument
from worldserve.gateway.simulator import (
    Delta,
    NewSession,
    Restart,
    StepEvent,
    StepInput,
    StepResult,
)
from worldserve.sessions.lineage import base_count
from worldserve.sessions.records import SessionRecord, TurnRecord
from worldserve.v1 import simulator_pb2 as pb


def _ts(epoch: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(epoch * 1e9))
    return ts


def _domain(value: int) -> str:
    if value == pb.DOMAIN_UNSPECIFIED:
        return ""
    try:
        return pb.Domain.Name(value)  # type: ignore[arg-type]
    except ValueError:
        raise InvalidArgument(f"unknown domain value {value}") from None


def _faults(policy: pb.FaultPolicy) -> dict[str, object]:
    faults: dict[str, object] = {"kinds": list(policy.kinds), "rate": policy.rate,
                                 "turns": list(policy.turns)}
    if policy.HasField("seed"):
        faults["seed"] = policy.seed
    return faults


def tool_spec(t: pb.Tool) -> ToolSpec:
    try:
        return ToolSpec(t.name, t.description, parse_schema(t.input_schema, t.name))
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


def tool_pb(t: dict[str, object]) -> pb.Tool:
    spec = ToolSpec.from_dict(t)
    return pb.Tool(name=spec.name, description=spec.description,
                   input_schema=json.dumps(spec.input_schema, ensure_ascii=False))


def new_session(req: pb.CreateSessionRequest | pb.ImportTrajectoryRequest) -> NewSession:
    """The session spec of a CreateSession (or of an import: no task/state/prompt/tools)."""
    s = req.sampling
    task, state, prompt = "", "", None
    tools: tuple[ToolSpec, ...] = ()
    if isinstance(req, pb.CreateSessionRequest):
        task, state = req.task_instruction, req.initial_state
        prompt = req.system_prompt if req.HasField("system_prompt") else None
        tools = tuple(tool_spec(t) for t in req.tools)
    return NewSession(
        domain=_domain(req.domain),
        model=req.model,
        task_instruction=task,
        initial_state=state,
        system_prompt=prompt,
        temperature=s.temperature if s.HasField("temperature") else None,
        top_p=s.top_p if s.HasField("top_p") else None,
        max_tokens=s.max_tokens if s.HasField("max_tokens") else None,
        reasoning_budget=s.reasoning_budget if s.HasField("reasoning_budget") else 0,
        seed=req.seed if req.HasField("seed") else None,
        faults=_faults(req.faults),
        labels=dict(req.labels),
        ttl_seconds=req.ttl_seconds,
        tools=tools,
    )


def step_input(req: pb.StepRequest) -> StepInput:
    return StepInput(
        session_id=req.session_id, action=req.action,
        expected_turn=req.expected_turn if req.HasField("expected_turn") else None,
        current_state=req.current_state if req.HasField("current_state") else "",
    )


def turn_pb(index: int, t: TurnRecord) -> pb.Turn:
    return pb.Turn(
        index=index, action=t.action, observation=t.observation, reasoning=t.reasoning,
        usage=pb.Usage(input_tokens=t.input_tokens, output_tokens=t.output_tokens,
                       reasoning_tokens=t.reasoning_tokens),
        model_version=t.model_version, finish_reason=t.finish_reason, fault_kind=t.fault_kind,
        created_at=_ts(t.created_at), current_state=t.current_state, seed=t.seed,
        sampling=pb.SamplingParams(**t.sampling) if t.sampling else None, imported=t.imported,
    )


def session_pb(r: SessionRecord, turn_count: int, turns: list[TurnRecord] | None = None,
               updated_at: float | None = None) -> pb.Session:
    faults = pb.FaultPolicy(kinds=r.faults.get("kinds", []), rate=r.faults.get("rate", 0.0),
                            turns=r.faults.get("turns", []))
    if "seed" in r.faults:
        faults.seed = r.faults["seed"]
    msg = pb.Session(
        session_id=r.session_id, domain=pb.Domain.Value(r.domain), model_version=r.model_version,
        task_instruction=r.task_instruction, initial_state=r.initial_state,
        system_prompt=r.system_prompt,
        sampling=pb.SamplingParams(temperature=r.sampling.temperature, top_p=r.sampling.top_p,
                                   max_tokens=r.sampling.max_tokens,
                                   reasoning_budget=r.sampling.reasoning_budget),
        faults=faults, labels=r.labels, ttl_seconds=r.ttl_seconds, turn_count=turn_count,
        created_at=_ts(r.created_at), parent_session_id=r.parent_session_id,
        fork_turn=base_count(r.lineage), tools=[tool_pb(t) for t in r.tools],
    )
    if r.seed is not None:
        msg.seed = r.seed
    last = turns[-1].created_at if turns else None
    msg.updated_at.CopyFrom(_ts(updated_at or last or r.created_at))
    if turns:
        msg.turns.extend(turn_pb(i + 1, t) for i, t in enumerate(turns))
    return msg


def step_response(result: StepResult) -> pb.StepResponse:
    t = result.turn
    return pb.StepResponse(
        session_id=result.session_id, observation=t.observation, reasoning=t.reasoning,
        turn=result.turn_index,
        usage=pb.Usage(input_tokens=t.input_tokens, output_tokens=t.output_tokens,
                       reasoning_tokens=t.reasoning_tokens),
        model_version=t.model_version, finish_reason=t.finish_reason, fault_kind=t.fault_kind,
        replayed=result.replayed, preview=result.preview, sample_index=result.sample, seed=t.seed,
    )


def step_event(event: StepEvent) -> pb.StepEvent:
    if isinstance(event, Delta):
        if event.part is Part.REASONING:
            return pb.StepEvent(reasoning_delta=event.text)
        return pb.StepEvent(observation_delta=event.text)
    if isinstance(event, Restart):
        return pb.StepEvent(restart=event.reason)
    return pb.StepEvent(final=step_response(event))
