"""ExportTrajectory and ImportTrajectory over the session store (formats: sessions.trajectory)."""

from __future__ import annotations

import time

from worldserve.errors import InvalidArgument, NotFound, ResourceExhausted, echo
from worldserve.gateway.simulator import NewSession, Simulator
from worldserve.sessions.limits import MAX_REPLY_BYTES, utf8_size
from worldserve.sessions.records import SessionRecord, TurnRecord
from worldserve.sessions.trajectory import AGENTWORLDBENCH, FORMATS, dumps, parse_agentworldbench

MAX_EXPORTED_SESSIONS = 1000


async def export(sim: Simulator, tenant: str, session_id: str, fmt: str, include_forks: bool
                 ) -> tuple[bytes, dict[str, object]]:
    """The session (and its live forks, depth first) in ``fmt``, with a small summary."""
    fmt = fmt or AGENTWORLDBENCH
    if fmt not in FORMATS:
        raise InvalidArgument(f"format must be one of {', '.join(FORMATS)}")
    sessions: list[tuple[SessionRecord, list[TurnRecord]]] = []
    pending = [session_id]
    while pending:
        sid = pending.pop(0)
        loaded = await sim.store.load(tenant, sid)
        if loaded is None:
            if sid == session_id:
                raise NotFound(f"session {echo(session_id)} not found")
            continue  # a fork closed or expired since: nothing to export
        sessions.append((loaded.record, loaded.turns))
        if len(sessions) > MAX_EXPORTED_SESSIONS:
            raise ResourceExhausted(f"a fork tree export holds at most {MAX_EXPORTED_SESSIONS} "
                                    "sessions; export subtrees", subject="export:sessions")
        if include_forks:
            pending = [*await sim.store.forks(tenant, sid), *pending]
    content = dumps(fmt, sessions)
    faults = sum(1 for _, turns in sessions for t in turns if t.fault_kind)
    return content, {"sessions": len(sessions), "turns": sum(len(t) for _, t in sessions),
                     "fault_turns": faults, "format": fmt}


async def import_trajectory(sim: Simulator, tenant: str, content: bytes, fmt: str,
                            new: NewSession) -> tuple[SessionRecord, int]:
    """Start a session whose history is a recorded trajectory (turns marked ``imported``)."""
    if (fmt or AGENTWORLDBENCH) != AGENTWORLDBENCH:
        raise InvalidArgument("only the agentworldbench format can be imported")
    if len(content) > sim.settings.max_import_bytes:
        raise InvalidArgument(f"a trajectory may be at most {sim.settings.max_import_bytes} bytes")
    try:
        parsed = parse_agentworldbench(content, new.domain)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"not an importable trajectory: {exc}") from None
    limits = sim.settings
    for number, t in enumerate(parsed.turns, start=1):
        for field, value, top in (("action", t.action, limits.max_action_bytes),
                                  ("current state", t.current_state, limits.max_state_bytes),
                                  ("observation", t.observation, limits.max_state_bytes)):
            if utf8_size(value) > top:
                raise InvalidArgument(f"turn {number}'s {field} exceeds {top} bytes (the limit "
                                      "of a live step)")
    if len(parsed.turns) >= sim.settings.max_turns_per_session:
        raise InvalidArgument(f"the trajectory has {len(parsed.turns)} turns; sessions hold at "
                              f"most {sim.settings.max_turns_per_session}")
    system_prompt = new.system_prompt if new.system_prompt is not None else (
        parsed.system_prompt or None)
    spec = NewSession(
        domain=parsed.domain, model=new.model, task_instruction=parsed.task_instruction,
        initial_state=parsed.initial_state, system_prompt=system_prompt,
        temperature=new.temperature, top_p=new.top_p, max_tokens=new.max_tokens,
        reasoning_budget=new.reasoning_budget, seed=new.seed, faults=new.faults,
        labels={**(new.labels or {}), "imported_from": parsed.source_id[:200]},
        ttl_seconds=new.ttl_seconds)
    now = time.time()
    turns = [TurnRecord(action=t.action, observation=t.observation, reasoning="",
                        input_tokens=0, output_tokens=0, reasoning_tokens=0,
                        model_version="imported", finish_reason="imported", created_at=now,
                        current_state=t.current_state, imported=True) for t in parsed.turns]
    record = await sim.create_session(tenant, spec)
    size = len(dumps(AGENTWORLDBENCH, [(record, turns)]))
    if size > MAX_REPLY_BYTES:  # it could never be exported: refuse it now, not then
        await sim.close_session(tenant, record.session_id)
        raise InvalidArgument(f"the imported session would export as {size} bytes, over the "
                              f"{MAX_REPLY_BYTES}-byte reply limit (each record repeats the "
                              "turns before it); import fewer or shorter turns")
    await sim.store.put(record, turns)
    return record, len(turns)

