"""An OpenEnv environment server whose environment is a worldserve simulation session.

Built with the ``openenv`` library's server (``Environment`` subclass + ``create_app``), marked
for concurrent sessions: each WebSocket ``/ws`` connection is one environment, and each of its
``reset``s opens one worldserve session; HTTP ``/reset`` ``/step`` ``/state`` ``/schema``
``/health`` are the library's. Requests carry the tenant's bearer key (``Authorization`` header,
also on the WebSocket handshake); it is passed on to the gateway, so tenants, quotas and usage
apply unchanged. Over stateless HTTP a ``/step`` names its session in the action
(``session_id``, returned by ``/reset`` in the metadata).

Runs as its own process (``worldserve openenv``), in its own environment (``openenv`` pins mcp<2,
our MCP server needs mcp 2: docs/INTEGRATIONS.md); it reaches the gateway through the SDK only.
"""

from __future__ import annotations

import contextvars
import importlib
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException
from openenv.core.env_server import Action, Environment, Observation, State, create_app
from pydantic import Field
from starlette.types import ASGIApp, Receive, Scope, Send

from worldserve.errors import WorldserveError
from worldserve.frontends.episodes import (
    episode_spec,
    over_turns,
    session_metadata,
    step_metadata,
)
from worldserve.frontends.upstream import Upstream, bearer_key, describe_error
from worldserve.sdk import SessionInfo
from worldserve.settings import Settings

# The bearer key of the request (or WebSocket) being served; set by BearerKey.
_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("worldserve_key", default=None)
_HTTP_STATUS = {"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "UNAUTHENTICATED": 401,
                "PERMISSION_DENIED": 403, "NOT_FOUND": 404, "ABORTED": 409,
                "RESOURCE_EXHAUSTED": 429, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504}


class WorldAction(Action):
    """The agent's action, as text (MCP: ``{"tool": …, "arguments": …}``)."""

    action: str = Field(..., min_length=1, description="The agent's action, as text.")
    session_id: str | None = Field(
        None, description="HTTP /step only: the session /reset opened (WebSocket: implied).")
    expected_turn: int | None = Field(
        None, ge=0, description="Apply only if the session has exactly this many turns.")


class WorldObservation(Observation):
    """The world model's predicted observation; the step's receipt is in ``metadata``."""

    observation: str = Field("", description="What the environment would answer.")


class WorldState(State):
    """The session's record (``step_count`` = turns in the session)."""

    session_id: str = ""
    domain: str = ""
    model_version: str = ""
    task_instruction: str = ""
    initial_state: str = ""
    max_turns: int = 0
    labels: dict[str, str] = Field(default_factory=dict)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    parent_session_id: str = ""


class Refused(HTTPException):
    """A gateway refusal: an HTTP error on /reset and /step, an error frame on /ws."""

    def __init__(self, exc: WorldserveError) -> None:
        info = describe_error(exc)
        headers = ({"Retry-After": str(max(1, round(info["retry_after_s"])))}
                   if info.get("retry_after_s") else None)
        super().__init__(_HTTP_STATUS.get(exc.code_name, 500), f"{exc.code_name}: {exc}", headers)

    def __str__(self) -> str:
        return str(self.detail)


def load_hook(path: str) -> Any:
    """``module:attribute`` -> the attribute (a factory is called); None for ''."""
    if not path:
        return None
    module, _, attr = path.partition(":")
    if not attr:
        raise ValueError(f"{path!r}: expected 'module:attribute'")
    value = getattr(importlib.import_module(module), attr)
    return value() if isinstance(value, type) else value


Terminate = Callable[[str, str, dict[str, Any]], bool]


class WorldEnvironment(Environment[WorldAction, WorldObservation, WorldState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, upstream: Upstream, settings: Settings, rubric: Any = None,
                 terminate: Terminate | None = None) -> None:
        super().__init__(rubric=rubric)
        self.upstream, self.settings, self.terminate = upstream, settings, terminate
        self._key: str | None = None
        self._info: SessionInfo | None = None
        self._turns = 0
        self._max_turns = settings.openenv_max_turns

    def _client_key(self) -> str:
        key = _KEY.get() or self._key
        if not key:
            raise HTTPException(401, "missing bearer key (Authorization: Bearer …)",
                                {"WWW-Authenticate": 'Bearer realm="worldserve"'})
        return key

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> WorldObservation:
        raise NotImplementedError("worldserve's environment is async: reset_async")

    def step(self, action: WorldAction, timeout_s: float | None = None,
             **kwargs: Any) -> WorldObservation:
        raise NotImplementedError("worldserve's environment is async: step_async")

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None,
                          **kwargs: Any) -> WorldObservation:
        """Open a session: domain, task_instruction, initial_state, model, seed, faults, tools,
        labels, sampling (temperature, top_p, max_tokens, reasoning_budget), ttl_seconds,
        max_turns."""
        params = dict(kwargs, seed=seed, episode_id=episode_id)
        try:
            spec = episode_spec({k: v for k, v in params.items() if v is not None},
                                self.settings.openenv_max_turns)
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        key = self._client_key()
        try:
            info = await self.upstream.client(key).create_session(spec.domain, **spec.create)
        except WorldserveError as exc:
            raise Refused(exc) from None
        self._key, self._info, self._turns, self._max_turns = key, info, 0, spec.max_turns
        self._reset_rubric()
        return WorldObservation(observation=info.initial_state, done=False, reward=None,
                                metadata=dict(session_metadata(info), max_turns=spec.max_turns))

    async def step_async(self, action: WorldAction, timeout_s: float | None = None,
                         **kwargs: Any) -> WorldObservation:
        session_id = self._info.session_id if self._info else action.session_id
        if not session_id:
            raise HTTPException(400, "no session: reset first (over HTTP, pass the session_id "
                                "that /reset returned in the action)")
        if self._info and action.session_id not in (None, session_id):
            raise HTTPException(400, f"this connection's session is {session_id}")
        try:
            step = await self.upstream.client(self._client_key()).step(
                session_id, action.action, expected_turn=action.expected_turn,
                timeout_s=timeout_s)
        except WorldserveError as exc:
            raise Refused(exc) from None
        self._turns = step.turn
        obs = WorldObservation(observation=step.observation, metadata=step_metadata(step))
        obs.reward = float(await self._apply_rubric_async(action, obs))
        obs.done = over_turns(step.turn, self._max_turns) or bool(
            self.terminate and self.terminate(action.action, step.observation, obs.metadata))
        return obs

    @property
    def state(self) -> WorldState:
        info = self._info
        if info is None:  # a stateless HTTP /state, or before the first reset
            return WorldState(step_count=0, max_turns=self._max_turns)
        return WorldState(
            episode_id=info.labels.get("openenv-episode"), step_count=self._turns,
            session_id=info.session_id, domain=info.domain, model_version=info.model_version,
            task_instruction=info.task_instruction, initial_state=info.initial_state,
            max_turns=self._max_turns, labels=info.labels,
            tools=[t.to_dict() for t in info.tools], parent_session_id=info.parent_session_id)


class BearerKey:
    """Makes each request's bearer key (HTTP or WebSocket handshake) visible to the
    environment serving it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        token = _KEY.set(bearer_key(headers.get(b"authorization", b"").decode("latin-1")))
        try:
            await self.app(scope, receive, send)
        finally:
            _KEY.reset(token)


def build_app(settings: Settings, upstream: Upstream | None = None) -> Any:
    """The OpenEnv FastAPI app (concurrent sessions) with the bearer-key middleware."""
    upstream = upstream or Upstream(settings.frontend_upstream_target)
    rubric_factory = settings.openenv_rubric
    terminate = load_hook(settings.openenv_terminate)

    def make_env() -> WorldEnvironment:
        return WorldEnvironment(upstream, settings, load_hook(rubric_factory), terminate)

    app = create_app(make_env, WorldAction, WorldObservation, env_name="worldserve",
                     max_concurrent_envs=settings.openenv_max_sessions, state_cls=WorldState)
    app.add_middleware(BearerKey)
    return app


def serve(settings: Settings) -> None:
    import uvicorn

    uvicorn.run(build_app(settings), host=settings.openenv_host, port=settings.openenv_port,
                log_level="warning", ws_max_size=16 * 2**20)


if __name__ == "__main__":
    serve(Settings())
