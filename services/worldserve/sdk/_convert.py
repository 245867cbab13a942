"""SDK <-> protobuf conversion and status-code -> exception mapping."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC
from typing import Any

import grpc

from worldserve import errors
from worldserve.domains.tools import ToolSpec
from worldserve.sdk.types import (
    BatchItem,
    BatchStep,
    Export,
    FaultPolicy,
    ObservationDelta,
    ReasoningDelta,
    Restart,
    SessionInfo,
    StepResult,
    StreamEvent,
    Turn,
    Usage,
)
from worldserve.v1 import simulator_pb2 as pb


class Unimplemented(errors.WorldserveError):
    """The server does not implement this call yet."""

    code_name = "UNIMPLEMENTED"


class InternalError(errors.WorldserveError):
    """The server failed unexpectedly."""

    code_name = "INTERNAL"


# Each status code to the most general error class that names it (the direct subclasses).
_BY_CODE: dict[grpc.StatusCode, type[errors.WorldserveError]] = {
    grpc.StatusCode[cls.code_name]: cls for cls in errors.WorldserveError.__subclasses__()}


def _quota_details(exc: grpc.RpcError) -> tuple[str, float]:
    """(QuotaFailure subject, RetryInfo seconds) from a RESOURCE_EXHAUSTED status's details."""
    from google.rpc import error_details_pb2, status_pb2

    trailing = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    raw = next((v for k, v in (trailing or ()) if k == "grpc-status-details-bin"), None)
    if not isinstance(raw, bytes):
        return "", 0.0
    subject, retry = "", 0.0
    for detail in status_pb2.Status.FromString(raw).details:
        failure, info = error_details_pb2.QuotaFailure(), error_details_pb2.RetryInfo()
        if detail.Unpack(failure) and failure.violations:
            subject = failure.violations[0].subject
        elif detail.Unpack(info):
            retry = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
    return subject, retry


def translate(exc: grpc.RpcError) -> errors.WorldserveError:
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    cls = _BY_CODE.get(code, InternalError)
    if cls is errors.ResourceExhausted:
        subject, retry = _quota_details(exc)
        err: errors.WorldserveError = errors.ResourceExhausted(details or code.name, subject,
                                                               retry)
    else:
        err = cls(details or code.name)
    err.code = code  # type: ignore[attr-defined]
    return err


def sampling(temperature: float | None, top_p: float | None, max_tokens: int | None,
             reasoning_budget: int | None = None) -> pb.SamplingParams:
    msg = pb.SamplingParams()
    if reasoning_budget is not None:
        msg.reasoning_budget = reasoning_budget
    if temperature is not None:
        msg.temperature = temperature
    if top_p is not None:
        msg.top_p = top_p
    if max_tokens is not None:
        msg.max_tokens = max_tokens
    return msg


def create_request(domain: str, **kw: Any) -> pb.CreateSessionRequest:
    try:
        domain_value = pb.Domain.Value(domain.upper())
    except ValueError:
        raise errors.InvalidArgument(f"unknown domain {domain!r}") from None
    req = pb.CreateSessionRequest(
        domain=domain_value, model=kw.get("model") or "",
        task_instruction=kw.get("task_instruction") or "",
        initial_state=kw.get("initial_state") or "",
        sampling=sampling(kw.get("temperature"), kw.get("top_p"), kw.get("max_tokens"),
                          kw.get("reasoning_budget")),
        labels=kw.get("labels") or {}, ttl_seconds=kw.get("ttl_seconds") or 0,
    )
    if kw.get("system_prompt") is not None:
        req.system_prompt = kw["system_prompt"]
    if kw.get("seed") is not None:
        req.seed = kw["seed"]
    if kw.get("faults") is not None:
        req.faults.CopyFrom(fault_policy(kw["faults"]))
    req.tools.extend(tool_message(t) for t in kw.get("tools") or ())
    return req


def tool_message(tool: ToolSpec | Mapping[str, Any]) -> pb.Tool:
    spec = tool if isinstance(tool, ToolSpec) else ToolSpec.from_dict(tool)
    return pb.Tool(name=spec.name, description=spec.description,
                   input_schema=json.dumps(spec.input_schema, ensure_ascii=False))


def tool_spec(t: pb.Tool) -> ToolSpec:
    return ToolSpec(t.name, t.description,
                    json.loads(t.input_schema) if t.input_schema else {"type": "object"})


def fault_policy(f: FaultPolicy) -> pb.FaultPolicy:
    msg = pb.FaultPolicy(kinds=list(f.kinds), rate=f.rate, turns=list(f.turns))
    if f.seed is not None:
        msg.seed = f.seed
    return msg


def fork_request(session_id: str, at_turn: int | None, labels: dict[str, str] | None,
                 seed: int | None) -> pb.ForkSessionRequest:
    req = pb.ForkSessionRequest(session_id=session_id, labels=labels or {})
    if at_turn is not None:
        req.at_turn = at_turn
    if seed is not None:
        req.seed = seed
    return req


def batch_request(steps: list[BatchStep] | list[tuple[str, str]], commit: bool, samples: int
                  ) -> pb.BatchStepRequest:
    items = [s if isinstance(s, BatchStep) else BatchStep(*s) for s in steps]
    return pb.BatchStepRequest(
        steps=[step_request(s.session_id, s.action, s.expected_turn, s.current_state)
               for s in items], commit=commit, samples=samples)


def batch_items(r: pb.BatchStepResponse) -> list[BatchItem]:
    out = []
    for item in r.items:
        if item.code:
            code = next((c for c in grpc.StatusCode if c.value[0] == item.code),
                        grpc.StatusCode.UNKNOWN)
            error: Exception | None = _BY_CODE.get(code, InternalError)(item.message)
            out.append(BatchItem(item.request_index, item.sample_index, None, error))
        else:
            out.append(BatchItem(item.request_index, item.sample_index,
                                 step_result(item.response), None))
    return out


def export_result(r: pb.ExportTrajectoryResponse) -> Export:
    from google.protobuf.json_format import MessageToDict

    return Export(r.format, r.content, MessageToDict(r.metadata))


def import_request(content: bytes, **kw: Any) -> pb.ImportTrajectoryRequest:
    req = pb.ImportTrajectoryRequest(
        content=content, format="agentworldbench", model=kw.get("model") or "",
        sampling=sampling(kw.get("temperature"), kw.get("top_p"), kw.get("max_tokens")),
        labels=kw.get("labels") or {}, ttl_seconds=kw.get("ttl_seconds") or 0)
    if kw.get("domain"):
        req.domain = create_request(kw["domain"]).domain
    if kw.get("seed") is not None:
        req.seed = kw["seed"]
    if kw.get("faults") is not None:
        req.faults.CopyFrom(fault_policy(kw["faults"]))
    return req


def step_request(session_id: str, action: str, expected_turn: int | None,
                 current_state: str | None) -> pb.StepRequest:
    req = pb.StepRequest(session_id=session_id, action=action)
    if expected_turn is not None:
        req.expected_turn = expected_turn
    if current_state is not None:
        req.current_state = current_state
    return req


def _usage(u: pb.Usage) -> Usage:
    return Usage(u.input_tokens, u.output_tokens, u.reasoning_tokens)


def step_result(r: pb.StepResponse) -> StepResult:
    return StepResult(r.session_id, r.turn, r.observation, r.reasoning, _usage(r.usage),
                      r.model_version, r.finish_reason, r.fault_kind, r.replayed, r.preview,
                      r.sample_index, r.seed if r.HasField("seed") else None)


def stream_event(e: pb.StepEvent) -> StreamEvent:
    kind = e.WhichOneof("event")
    if kind == "reasoning_delta":
        return ReasoningDelta(e.reasoning_delta)
    if kind == "observation_delta":
        return ObservationDelta(e.observation_delta)
    if kind == "restart":
        return Restart(e.restart)
    return step_result(e.final)


def session_info(s: pb.Session) -> SessionInfo:
    return SessionInfo(
        session_id=s.session_id, domain=pb.Domain.Name(s.domain), model_version=s.model_version,
        task_instruction=s.task_instruction, initial_state=s.initial_state,
        turn_count=s.turn_count, ttl_seconds=s.ttl_seconds,
        seed=s.seed if s.HasField("seed") else None, labels=dict(s.labels),
        created_at=s.created_at.ToDatetime(tzinfo=UTC),
        turns=[Turn(t.index, t.action, t.observation, t.reasoning, _usage(t.usage),
                    t.model_version, t.finish_reason, t.created_at.ToDatetime(tzinfo=UTC),
                    t.fault_kind, t.seed if t.HasField("seed") else None, t.imported)
               for t in s.turns],
        parent_session_id=s.parent_session_id, fork_turn=s.fork_turn,
        tools=[tool_spec(t) for t in s.tools],
    )
