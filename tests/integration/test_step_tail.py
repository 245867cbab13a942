"""A step reads only the latest turns, yet renders exactly the prompt of the whole history —
for long sessions, forks and retries of old turns."""

from __future__ import annotations

import pytest

from tests.conftest import TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, running_gateway, stub_for
from worldserve.backends.checkpoint import load_chat_template
from worldserve.domains.chat import render_chat
from worldserve.domains.rendering import PastTurn, PromptInput, build_messages
from worldserve.settings import DEFAULT_MODEL_DIR, Settings
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration


def whole_history_prompt(settings: Settings, system: str, turns: list[pb.Turn], action: str
                         ) -> str:
    history = [PastTurn(t.action, t.observation, t.current_state) for t in turns]
    messages = build_messages(PromptInput(system, "task", "state", history, action),
                              settings.history_window_turns,
                              stride=settings.history_window_stride)
    return render_chat(load_chat_template(DEFAULT_MODEL_DIR), messages)


async def test_long_sessions_and_forks_render_the_whole_history_prompt(key_prefix: str,
                                                                       redis_url: str) -> None:
    backend = EchoBackend()
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        history_window_turns=3, history_window_stride=2)
    md = auth(TEST_KEY)
    async with running_gateway(settings, redis_url, backend) as gw, stub_for(gw) as stub:
        s = await stub.CreateSession(pb.CreateSessionRequest(
            domain=pb.TERMINAL, task_instruction="task", initial_state="state",
            system_prompt="sys"), metadata=md)
        for i in range(30):
            await stub.Step(pb.StepRequest(session_id=s.session_id, action=f"cmd {i}",
                                           expected_turn=i), metadata=md)
        # a fork at turn 25 of that, stepped on: its prompt spans the parent's turns and its own
        child = await stub.ForkSession(pb.ForkSessionRequest(session_id=s.session_id,
                                                             at_turn=25), metadata=md)
        for i in range(4):
            await stub.Step(pb.StepRequest(session_id=child.session_id, action=f"fork {i}",
                                           expected_turn=25 + i), metadata=md)
        # a fork of the fork: its tail spans two inherited segments and its own turns
        grandchild = await stub.ForkSession(pb.ForkSessionRequest(
            session_id=child.session_id, at_turn=27), metadata=md)
        await stub.Step(pb.StepRequest(session_id=grandchild.session_id, action="gc 0",
                                       expected_turn=27), metadata=md)
        for sid, action in ((s.session_id, "final"), (child.session_id, "fork final"),
                            (grandchild.session_id, "grandchild final")):
            got = await stub.GetSession(pb.GetSessionRequest(session_id=sid, include_turns=True),
                                        metadata=md)
            await stub.Step(pb.StepRequest(session_id=sid, action=action,
                                           expected_turn=got.turn_count), metadata=md)
            assert backend.prompts[-1] == whole_history_prompt(settings, "sys", list(got.turns),
                                                               action)
        # a retry of a turn long before the loaded tail still gets its stored answer back
        calls = len(backend.prompts)
        again = await stub.Step(pb.StepRequest(session_id=s.session_id, action="cmd 2",
                                               expected_turn=2), metadata=md)
        assert again.turn == 3 and again.observation == "did: cmd 2"
        assert len(backend.prompts) == calls  # replayed, not generated
        conflict = stub.Step(pb.StepRequest(session_id=s.session_id, action="other",
                                            expected_turn=2), metadata=md)
        with pytest.raises(Exception, match="ABORTED"):
            await conflict


async def test_a_session_stepped_through_two_gateways_sees_every_turn(key_prefix: str,
                                                                      redis_url: str) -> None:
    """A gateway renders a step from the tail it kept after its own commit, checked in the
    reservation's round trip; once the session moved on elsewhere (or closed), it loads again."""
    backend = EchoBackend()
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        history_window_turns=3, history_window_stride=2)
    md = auth(TEST_KEY)
    async with running_gateway(settings, redis_url, backend) as a, \
            running_gateway(settings, redis_url, backend) as b, \
            stub_for(a) as sa, stub_for(b) as sb:
        loads = {"a": 0, "b": 0}
        for name, gw in (("a", a), ("b", b)):
            assert gw.simulator is not None
            store, load = gw.simulator.store, gw.simulator.store.load

            async def counted(*args: object, _name: str = name, _load: object = load,
                              **kwargs: object) -> object:
                if "tail" in kwargs:  # a step's load, not GetSession's
                    loads[_name] += 1
                return await _load(*args, **kwargs)  # type: ignore[operator]

            store.load = counted  # type: ignore[method-assign]
        s = await sa.CreateSession(pb.CreateSessionRequest(
            domain=pb.TERMINAL, task_instruction="task", initial_state="state",
            system_prompt="sys"), metadata=md)
        for i, (name, stub) in enumerate([("a", sa), ("a", sa), ("a", sa), ("b", sb),
                                          ("a", sa), ("b", sb), ("b", sb), ("a", sa)]):
            got = await sb.GetSession(pb.GetSessionRequest(session_id=s.session_id,
                                                           include_turns=True), metadata=md)
            reply = await stub.Step(pb.StepRequest(session_id=s.session_id, action=f"cmd {i}"),
                                    metadata=md)
            assert reply.turn == i + 1, name
            assert backend.prompts[-1] == whole_history_prompt(settings, "sys", list(got.turns),
                                                               f"cmd {i}")
        # a: its first step, then after b's turns (twice); b: after a's turns (twice)
        assert loads == {"a": 3, "b": 2}
        # a retry of a's last step through a is answered from the store (a replay), not cached
        calls = len(backend.prompts)
        again = await sa.Step(pb.StepRequest(session_id=s.session_id, action="cmd 7",
                                              expected_turn=7), metadata=md)
        assert again.turn == 8 and again.observation == "did: cmd 7"
        assert len(backend.prompts) == calls
        await sa.Step(pb.StepRequest(session_id=s.session_id, action="cmd 8"), metadata=md)
        await sb.CloseSession(pb.CloseSessionRequest(session_id=s.session_id), metadata=md)
        with pytest.raises(Exception, match="NOT_FOUND"):  # a's tail is stale: it loads
            await sa.Step(pb.StepRequest(session_id=s.session_id, action="late"), metadata=md)
        assert len(backend.prompts) == calls + 1
        assert a.simulator is not None and b.simulator is not None
        # nothing stays reserved: a stale check reserves nothing
        assert await a.simulator.quota.inflight(settings.dev_tenant) == 0
