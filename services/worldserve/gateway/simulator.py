"""The simulator core: sessions and steps, independent of gRPC.

The servicer converts protobuf to these calls; everything here raises the project's error tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from worldserve.backends.base import Backend
from worldserve.db.directory import Directory
from worldserve.domains.chat import render_chat
from worldserve.domains.faults import control_instruction, fault_for, normalize_policy
from worldserve.domains.parsing import MalformedCompletion, ParsedCompletion, parse_completion
from worldserve.domains.rendering import PastTurn, PromptInput, build_messages, turns_needed
from worldserve.domains.templates import Domain, system_prompt
from worldserve.domains.tools import ToolSpec, check_tools
from worldserve.errors import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    ModelOutputError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    echo,
)
from worldserve.gateway.generation import Delta, Meter, generate
from worldserve.observability import metrics
from worldserve.observability.tracing import tracer
from worldserve.quota.counters import RedisQuota, Reservation, ReservationSkipped
from worldserve.quota.events import UsageEvent
from worldserve.quota.limits import check_allowed, oversized, reservation_tokens
from worldserve.routing.router import Router
from worldserve.sessions.limits import check_labels, utf8_size
from worldserve.sessions.lineage import base_count, fork_lineage
from worldserve.sessions.records import LoadedSession, Sampling, SessionRecord, TurnRecord
from worldserve.sessions.rules import Verdict, admit, needs_older
from worldserve.sessions.store import SessionStore
from worldserve.sessions.tails import TailCache
from worldserve.settings import Settings

log = logging.getLogger(__name__)
NO_LIMIT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class NewSession:
    domain: str
    model: str = ""
    task_instruction: str = ""
    initial_state: str = ""
    system_prompt: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    reasoning_budget: int = 0
    seed: int | None = None
    faults: dict[str, Any] | None = None
    labels: dict[str, str] | None = None
    ttl_seconds: int = 0
    tools: tuple[ToolSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class StepInput:
    session_id: str
    action: str
    expected_turn: int | None = None
    current_state: str = ""


@dataclass(frozen=True, slots=True)
class StepResult:
    session_id: str
    turn_index: int
    turn: TurnRecord
    replayed: bool = False
    preview: bool = False  # a counterfactual: generated, not stored
    sample: int = 0


@dataclass(frozen=True, slots=True)
class Restart:
    reason: str


StepEvent = Delta | Restart | StepResult


@dataclass(slots=True)
class StepContext:
    """One admitted step on its way through generate and commit."""

    tenant: str
    step: StepInput
    loaded: LoadedSession  # the session as the prompt shows it
    started: float
    deadline: float  # monotonic
    seed: int | None
    sample: int
    fault: str
    backend: Backend
    template: str
    prompt: str  # the first attempt's
    reservation: Reservation
    meter: Meter = dataclasses.field(default_factory=Meter)
    parsed: ParsedCompletion | None = None

    @property
    def record(self) -> SessionRecord:
        return self.loaded.record

    @property
    def count(self) -> int:
        """Turns before this one."""
        return self.loaded.turn_count


class Simulator:
    def __init__(self, settings: Settings, store: SessionStore, router: Router,
                 directory: Directory, quota: RedisQuota) -> None:
        self.settings = settings
        self.store = store
        self.router = router
        self.directory = directory
        self.quota = quota
        self.tails = TailCache(int(settings.session_tail_cache_mib * 2**20),
                               turns_needed(settings.history_window_turns,
                                            settings.history_window_stride))

    # --- sessions ---

    def _validate_new(self, new: NewSession) -> Sampling:
        s = self.settings
        try:
            Domain(new.domain)
        except ValueError:
            raise InvalidArgument(f"unknown domain {new.domain!r}") from None
        if new.domain not in s.allowed_domains:
            raise PermissionDenied(f"domain {new.domain} is not enabled on this deployment")
        if utf8_size(new.initial_state) > s.max_state_bytes:
            raise InvalidArgument(f"initial_state exceeds {s.max_state_bytes} bytes")
        if utf8_size(new.task_instruction) > s.max_state_bytes:
            raise InvalidArgument(f"task_instruction exceeds {s.max_state_bytes} bytes")
        if new.system_prompt is not None and utf8_size(new.system_prompt) > s.max_state_bytes:
            raise InvalidArgument(f"system_prompt exceeds {s.max_state_bytes} bytes")
        check_labels(new.labels)
        try:
            check_tools(new.domain, new.tools)
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
        temperature = s.default_temperature if new.temperature is None else new.temperature
        top_p = 1.0 if new.top_p is None else new.top_p
        max_tokens = s.default_max_tokens if new.max_tokens is None else new.max_tokens
        if not 0 <= temperature <= 2:
            raise InvalidArgument("sampling.temperature must be within [0, 2]")
        if not 0 < top_p <= 1:
            raise InvalidArgument("sampling.top_p must be within (0, 1]")
        if not 1 <= max_tokens <= s.max_tokens_limit:
            raise InvalidArgument(f"sampling.max_tokens must be within [1, {s.max_tokens_limit}]")
        if new.reasoning_budget < 0:
            raise InvalidArgument("sampling.reasoning_budget must not be negative")
        if not 0 <= new.ttl_seconds <= s.max_session_ttl_s:
            raise InvalidArgument(f"ttl_seconds must be within [0, {s.max_session_ttl_s}]")
        return Sampling(temperature, top_p, max_tokens, new.reasoning_budget)

    @staticmethod
    def _fault_policy(domain: str, faults: dict[str, Any] | None) -> dict[str, Any]:
        try:
            policy = normalize_policy(domain, faults)
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
        if policy and "seed" not in policy:  # fixed now, so replays and forks see the same faults
            policy["seed"] = random.getrandbits(31)
        return policy

    async def create_session(self, tenant: str, new: NewSession) -> SessionRecord:
        sampling = self._validate_new(new)
        version = self.router.resolve(new.model)  # aliases and weights resolved once, now
        served = self.router.domains(version)
        if new.domain not in served:
            raise FailedPrecondition(
                f"model {version} does not simulate {new.domain}; it serves "
                f"{', '.join(served)} (see ListModels)")
        context = self.router.prompt_limit(version).context
        if context and sampling.max_tokens >= context:
            raise InvalidArgument(
                f"sampling.max_tokens {sampling.max_tokens} leaves no room for a prompt in "
                f"{version}'s context of {context} tokens")
        limits = await self.directory.limits(tenant)
        check_allowed(limits, tenant, version, new.model, new.domain)
        ttl = new.ttl_seconds or self.settings.session_ttl_s
        session_id = "s_" + uuid.uuid4().hex
        limit = NO_LIMIT if limits.max_sessions is None else limits.max_sessions
        if not await self.store.admit(tenant, session_id, ttl, limit):
            raise ResourceExhausted(f"tenant already holds {limit} open sessions",
                                    subject=f"tenant:{tenant}:max_sessions", retry_after_s=30)
        record = SessionRecord(
            session_id=session_id, tenant=tenant, domain=new.domain, model_version=version,
            task_instruction=new.task_instruction, initial_state=new.initial_state,
            system_prompt=new.system_prompt or system_prompt(Domain(new.domain)),
            sampling=sampling, seed=new.seed, faults=self._fault_policy(new.domain, new.faults),
            labels=check_labels(new.labels), ttl_seconds=ttl, created_at=time.time(),
            tools=[t.to_dict() for t in new.tools],
        )
        await self.store.put(record)
        return record

    async def get_session(self, tenant: str, session_id: str, with_turns: bool
                          ) -> tuple[SessionRecord, list[TurnRecord], int]:
        loaded = await self.store.load(tenant, session_id, with_turns)
        if loaded is None:
            raise NotFound(f"session {echo(session_id)} not found")
        return loaded.record, loaded.turns, loaded.turn_count

    async def list_sessions(self, tenant: str, offset: int, count: int
                            ) -> tuple[list[tuple[SessionRecord, int]], int | None]:
        ids = await self.store.list_ids(tenant, offset, count + 1)
        more = len(ids) > count
        out = []
        for sid in ids[:count]:
            loaded = await self.store.load(tenant, sid, with_turns=False)
            if loaded is not None:  # expired between the index read and this load
                out.append((loaded.record, loaded.turn_count))
        return out, (offset + count if more else None)

    async def fork_session(self, tenant: str, session_id: str, at_turn: int | None = None,
                           labels: dict[str, str] | None = None, seed: int | None = None,
                           keep_seed: bool = True) -> SessionRecord:
        """A child sharing the parent's first ``at_turn`` turns (copy-on-write, O(depth))."""
        loaded = await self.store.load(tenant, session_id, with_turns=False)
        if loaded is None:
            raise NotFound(f"session {echo(session_id)} not found")
        parent, total = loaded.record, loaded.turn_count
        at = total if at_turn is None else at_turn
        if not 0 <= at <= total:
            raise InvalidArgument(f"at_turn must be within [0, {total}]")
        limits = await self.directory.limits(tenant)
        check_allowed(limits, tenant, parent.model_version, "", parent.domain)
        own = total - base_count(parent.lineage)
        child = dataclasses.replace(
            parent, session_id="s_" + uuid.uuid4().hex, parent_session_id=parent.session_id,
            lineage=fork_lineage(parent.session_id, parent.lineage, own, at),
            created_at=time.time(), labels=check_labels({**parent.labels, **(labels or {})}),
            seed=parent.seed if keep_seed else seed)
        limit = NO_LIMIT if limits.max_sessions is None else limits.max_sessions
        outcome = await self.store.fork(parent, child, limit)
        if outcome == "missing":
            raise NotFound(f"session {echo(session_id)} not found")
        if outcome == "limit":
            raise ResourceExhausted(f"tenant already holds {limit} open sessions",
                                    subject=f"tenant:{tenant}:max_sessions", retry_after_s=30)
        return child

    async def close_session(self, tenant: str, session_id: str) -> int:
        self.tails.drop(tenant, session_id)
        count = await self.store.close(tenant, session_id)
        if count is None:
            raise NotFound(f"session {echo(session_id)} not found")
        return count

    # --- steps ---

    def _check_step(self, step: StepInput) -> None:
        s = self.settings
        if not step.session_id:
            raise InvalidArgument("session_id is required")
        if not step.action.strip():
            raise InvalidArgument("action must not be empty")
        if utf8_size(step.action) > s.max_action_bytes:
            raise InvalidArgument(f"action exceeds {s.max_action_bytes} bytes")
        if utf8_size(step.current_state) > s.max_state_bytes:
            raise InvalidArgument(f"current_state exceeds {s.max_state_bytes} bytes")
        if step.expected_turn is not None and step.expected_turn < 0:
            raise InvalidArgument("expected_turn must not be negative")

    def _prompt(self, record: SessionRecord, turns: list[TurnRecord], first_index: int,
                step: StepInput, strict: bool, fault: str, template: str) -> str:
        history = [PastTurn(t.action, t.observation, t.current_state) for t in turns]
        prompt = PromptInput(record.system_prompt, record.task_instruction, record.prompt_state(),
                             history, step.action, step.current_state,
                             control_instruction(fault), history_offset=first_index)
        messages = build_messages(prompt, self.settings.history_window_turns, strict=strict,
                                  stride=self.settings.history_window_stride)
        return render_chat(template, messages)

    @staticmethod
    def _affinity(record: SessionRecord) -> str:
        """A fork prefers its root's replica: they share the prompt prefix (KV reuse)."""
        return record.lineage[0][0] if record.lineage else record.session_id

    def _seed(self, record: SessionRecord, turn_number: int, sample: int = 0) -> int | None:
        """Turn n's sampling seed; sample 0 is what a committed step uses."""
        if record.seed is None:
            return None
        return ((record.seed * 1_000_003 + turn_number) * 1_009 + sample) % (2**31 - 1)

    @staticmethod
    def _observe(tenant: str, record: SessionRecord, meter: Meter, outcome: str) -> None:
        metrics.STEPS.labels(tenant, record.model_version, record.domain, outcome).inc()
        for kind, value in (("input", meter.input_tokens), ("output", meter.output_tokens),
                            ("reasoning", meter.reasoning_tokens)):
            if value:
                metrics.TOKENS.labels(tenant, record.model_version, kind).inc(value)

    @staticmethod
    def _event(record: SessionRecord, meter: Meter, started: float, outcome: str,
               fault: str = "") -> UsageEvent:
        ended = time.time()
        return UsageEvent(
            event_id=uuid.uuid4().hex, tenant=record.tenant, session_id=record.session_id,
            model_version=record.model_version, domain=record.domain,
            input_tokens=meter.input_tokens, output_tokens=meter.output_tokens,
            reasoning_tokens=meter.reasoning_tokens, latency_ms=int((ended - started) * 1000),
            fault_kind=fault, started_at=started, ended_at=ended, outcome=outcome)

    async def _settle_failed(self, reservation: Reservation, record: SessionRecord, meter: Meter,
                             started: float, outcome: str, fault: str) -> None:
        """A step that stored nothing still used tokens: settle them and record the event.

        Shielded, so a cancelled RPC still settles; if Redis is down the reservation expires.
        """
        event = self._event(record, meter, started, outcome, fault)
        try:
            await asyncio.shield(self.quota.settle(reservation, event))
        except Exception:
            log.warning("could not settle step of session %s; its reservation will expire",
                        record.session_id, exc_info=True)

    async def step(self, tenant: str, step: StepInput, timeout_s: float | None,
                   commit: bool = True, sample: int = 0) -> AsyncIterator[StepEvent]:
        """Deltas while the model writes, then the StepResult (stored, or replayed).

        A straight pipeline: admit (load, admission rules, reserve), generate (one retry on a
        malformed answer, budget forcing inside ``generate``), settle and commit. With
        ``commit=False`` the step is a counterfactual preview: generated and metered like any
        step, never stored; ``sample`` selects its seed (sample 0 = the committed one's).
        """
        admitted = await self._admit(tenant, step, timeout_s, sample)
        if isinstance(admitted, StepResult):
            yield admitted  # a retry of a stored step: its turn, nothing generated
            return
        ctx = admitted
        metrics.INFLIGHT.labels(ctx.record.model_version).inc()
        try:
            async with contextlib.aclosing(self._generate(ctx)) as events:
                async for event in events:
                    yield event
        except BaseException as exc:
            cancelled = isinstance(exc, asyncio.CancelledError | GeneratorExit)
            outcome = "cancelled" if cancelled else "error"
            await self._settle_failed(ctx.reservation, ctx.record, ctx.meter, ctx.started,
                                      outcome, ctx.fault)
            self._observe(tenant, ctx.record, ctx.meter, outcome)
            raise
        finally:
            metrics.INFLIGHT.labels(ctx.record.model_version).dec()
        yield await self._settle_and_commit(ctx, commit)

    async def _admit(self, tenant: str, step: StepInput, timeout_s: float | None, sample: int
                     ) -> StepContext | StepResult:
        """Load the session, apply the admission rules, reserve the tokens.

        A session this gateway committed to last is taken from its tail cache and checked in the
        reservation's own round trip; if it moved on meanwhile (another gateway, a close), or the
        rules would refuse the step, the step loads it from Redis and decides on that.
        """
        self._check_step(step)
        cached = self.tails.get(tenant, step.session_id)
        if cached is not None and not needs_older(step.expected_turn, cached.first_index):
            admitted = await self._admit_loaded(tenant, step, timeout_s, sample, cached, True)
            if admitted is not None:
                return admitted
            self.tails.drop(tenant, step.session_id)
        with tracer.start_as_current_span("session.load", attributes={"db.system": "redis"}):
            loaded = await self.store.load(tenant, step.session_id, tail=self.tails.tail)
            if loaded is not None and needs_older(step.expected_turn, loaded.first_index):
                loaded = await self.store.load(tenant, step.session_id)  # a retry of an old turn
        if loaded is None:
            raise NotFound(f"session {echo(step.session_id)} not found")
        admitted = await self._admit_loaded(tenant, step, timeout_s, sample, loaded, False)
        assert admitted is not None
        return admitted

    async def _admit_loaded(self, tenant: str, step: StepInput, timeout_s: float | None,
                            sample: int, loaded: LoadedSession, cached: bool
                            ) -> StepContext | StepResult | None:
        """The admission of a step on ``loaded``; None when ``cached`` and that is not enough to
        decide (a refusal, or the session is no longer as the cache shows it)."""
        record, turns, first = loaded.record, loaded.turns, loaded.first_index
        count = loaded.turn_count
        verdict = admit(turns, step.action, step.expected_turn,
                        self.settings.max_turns_per_session, first)
        if cached and verdict.verdict is not Verdict.APPLY:
            return None
        if verdict.verdict is Verdict.REPLAY:
            assert verdict.stored is not None
            return StepResult(record.session_id, verdict.stored_index, verdict.stored, True)
        if verdict.verdict is not Verdict.APPLY:
            raise self._refusal(verdict.verdict, record, step.expected_turn, verdict.turn_count)
        started = time.time()
        timeout = min(timeout_s or self.settings.step_timeout_s, self.settings.max_step_timeout_s)
        fault = fault_for(record.faults, record.domain, count + 1, record.session_id)
        backend, template = self.router.target(record.model_version)  # pinned for life
        prompt = self._prompt(record, turns, first, step, False, fault, template)
        too_long = self.router.prompt_limit(record.model_version).refusal(
            prompt, record.sampling.max_tokens)
        if too_long:  # never sent: the model server's time is everyone's
            if cached:
                return None  # a refusal that depends on the turns is made on loaded ones
            raise InvalidArgument(too_long)
        limits = await self.directory.limits(tenant)
        check_allowed(limits, tenant, record.model_version, "", record.domain)  # quotas change
        tokens = reservation_tokens(utf8_size(prompt), record.sampling.max_tokens,
                                    self.settings.reserve_bytes_per_token)
        oversize = oversized(limits, tenant, tokens)
        if oversize is not None:
            if cached:
                return None
            raise oversize
        run = self.store.reserve_if_current(record, count) if cached else None
        with tracer.start_as_current_span("quota.reserve", attributes={"db.system": "redis",
                                                                        "worldserve.tokens": tokens}):
            try:
                reservation = await self.quota.reserve(tenant, limits, tokens,
                                                       self.settings.reservation_lease_s,
                                                       self.directory.month_tokens, run)
            except ReservationSkipped:  # only a cached tail's check answers so
                return None
        return StepContext(tenant, step, loaded, started, time.monotonic() + timeout,
                           self._seed(record, count + 1, sample), sample, fault, backend,
                           template, prompt, reservation)

    async def _generate(self, ctx: StepContext) -> AsyncGenerator[StepEvent, None]:
        """The model's answer as deltas; ``ctx.parsed`` holds it, or ModelOutputError."""
        record, first_delta, problem = ctx.record, True, ""
        for attempt in range(2):
            if attempt:
                yield Restart("the model's answer had no complete observation; retrying")
            prompt = ctx.prompt if attempt == 0 else self._prompt(
                record, ctx.loaded.turns, ctx.loaded.first_index, ctx.step, True, ctx.fault,
                ctx.template)
            text: list[str] = []
            with tracer.start_as_current_span("model.generate", attributes={
                    "worldserve.attempt": attempt, "worldserve.model": record.model_version}):
                async for delta in generate(ctx.backend, prompt, record.sampling, ctx.seed,
                                            ctx.deadline, ctx.meter, text,
                                            self._affinity(record)):
                    if first_delta:
                        metrics.FIRST_TOKEN_SECONDS.labels(record.model_version).observe(
                            time.time() - ctx.started)
                        first_delta = False
                    yield delta
            try:
                ctx.parsed = parse_completion("".join(text))
                return
            except MalformedCompletion as exc:
                problem = str(exc)
        raise ModelOutputError(
            f"the world model gave no usable observation twice ({problem}, finish_reason="
            f"{ctx.meter.finish or 'unknown'}); the turn was not stored")

    async def _settle_and_commit(self, ctx: StepContext, commit: bool) -> StepResult:
        """Settle the reservation and, unless a preview, append the turn — one script."""
        record, meter, sampling = ctx.record, ctx.meter, ctx.record.sampling
        assert ctx.parsed is not None
        turn = TurnRecord(
            action=ctx.step.action, observation=ctx.parsed.observation,
            reasoning=ctx.parsed.reasoning, input_tokens=meter.input_tokens,
            output_tokens=meter.output_tokens, reasoning_tokens=meter.reasoning_tokens,
            model_version=record.model_version, finish_reason=meter.finish or "stop",
            created_at=time.time(), current_state=ctx.step.current_state, seed=ctx.seed,
            sampling={"temperature": sampling.temperature, "top_p": sampling.top_p,
                      "max_tokens": sampling.max_tokens,
                      "reasoning_budget": sampling.reasoning_budget},
            fault_kind=ctx.fault,
        )
        if not commit:
            await self.quota.settle(ctx.reservation, self._event(record, meter, ctx.started,
                                                                 "preview", ctx.fault))
            self._observe(ctx.tenant, record, meter, "preview")
            return StepResult(record.session_id, ctx.count + 1, turn, preview=True,
                              sample=ctx.sample)
        expected = ctx.count if ctx.step.expected_turn is None else ctx.step.expected_turn
        event = self._event(record, meter, ctx.started, "ok", ctx.fault)
        settlement = self.quota.settlement(ctx.reservation, event)
        with tracer.start_as_current_span("session.commit", attributes={"db.system": "redis"}):
            result = await self.store.commit(record, turn, expected,
                                             self.settings.max_turns_per_session, settlement)
        if result.outcome == "ok":
            self.tails.committed(ctx.loaded, turn, result.turn_count)
        else:
            self.tails.drop(ctx.tenant, record.session_id)
        self._observe(ctx.tenant, record, meter, result.outcome)
        metrics.STEP_SECONDS.labels(record.model_version, record.domain).observe(
            time.time() - ctx.started)
        if result.outcome == "ok":
            return StepResult(record.session_id, result.turn_count, turn)
        if result.outcome == "replay":
            assert result.stored is not None
            return StepResult(record.session_id, expected + 1, result.stored, True)
        if result.outcome == "missing":
            raise NotFound(f"session {echo(ctx.step.session_id)} was closed or expired during "
                           "the step")
        verdict = Verdict.LIMIT if result.outcome == "limit" else Verdict.CONFLICT
        raise self._refusal(verdict, record, None, result.turn_count)

    def _refusal(self, verdict: Verdict, record: SessionRecord, expected_turn: int | None,
                 turn_count: int) -> Exception:
        """The error of a step the rules refuse: at admission, or found again at commit."""
        if verdict is Verdict.LIMIT:
            limit = self.settings.max_turns_per_session
            return ResourceExhausted(f"session reached {limit} turns",
                                     subject=f"session:{record.session_id}:turns")
        if expected_turn is not None:
            return Aborted(f"expected_turn={expected_turn} but the session has {turn_count} turns")
        return Aborted(f"another step was applied first: the session now has {turn_count} turns")
