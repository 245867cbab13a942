"""Forks, batch and counterfactual steps, faults, export/import, replay (real Redis; a scripted
backend that echoes the action, so every history can be checked exactly)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import grpc
import pytest
import redis

from tests.conftest import OTHER_KEY, TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, code_of, running_gateway, stub_for
from worldserve.domains.modelcard import ALL_DOMAINS
from worldserve.gateway.server import Gateway
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb
from worldserve.v1 import simulator_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration
MD = auth(TEST_KEY)


@pytest.fixture
async def echo(key_prefix: str, redis_url: str
               ) -> AsyncIterator[tuple[pb_grpc.SimulatorStub, EchoBackend, Gateway]]:
    backend = EchoBackend()
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        max_sessions_per_tenant=10_000, model_domains=list(ALL_DOMAINS))
    async with running_gateway(settings, redis_url, backend) as gw, stub_for(gw) as stub:
        yield stub, backend, gw


async def new_session(stub: pb_grpc.SimulatorStub, domain: int = pb.TERMINAL, **kw: object
                      ) -> pb.Session:
    return await stub.CreateSession(pb.CreateSessionRequest(domain=domain, **kw), metadata=MD)  # type: ignore[arg-type]


async def walk(stub: pb_grpc.SimulatorStub, sid: str, actions: list[str], start: int = 0) -> None:
    for i, action in enumerate(actions):
        await stub.Step(pb.StepRequest(session_id=sid, action=action, expected_turn=start + i),
                        metadata=MD)


async def history(stub: pb_grpc.SimulatorStub, sid: str) -> list[tuple[str, str]]:
    got = await stub.GetSession(pb.GetSessionRequest(session_id=sid, include_turns=True),
                                metadata=MD)
    assert got.turn_count == len(got.turns)
    return [(t.action, t.observation) for t in got.turns]


# --- forks ---

async def test_a_fork_shares_history_and_then_diverges(echo) -> None:  # type: ignore[no-untyped-def]
    stub, backend, _ = echo
    parent = await new_session(stub, seed=5, labels={"run": "a"})
    await walk(stub, parent.session_id, ["a1", "a2", "a3"])
    child = await stub.ForkSession(pb.ForkSessionRequest(session_id=parent.session_id, at_turn=2,
                                                         labels={"branch": "b"}), metadata=MD)
    assert child.parent_session_id == parent.session_id and child.fork_turn == 2
    assert child.turn_count == 2 and child.seed == 5
    assert dict(child.labels) == {"run": "a", "branch": "b"}
    assert await history(stub, child.session_id) == [("a1", "did: a1"), ("a2", "did: a2")]
    await walk(stub, child.session_id, ["b3", "b4"], start=2)
    # the child's prompt carried the shared turns as its history
    assert "**Action:** a2" in backend.prompts[-2] and "**Action:** b3" in backend.prompts[-2]
    assert [a for a, _ in await history(stub, child.session_id)] == ["a1", "a2", "b3", "b4"]
    assert [a for a, _ in await history(stub, parent.session_id)] == ["a1", "a2", "a3"]
    # a wrong expected_turn on a fork is refused; a retry of an applied step is replayed
    assert await code_of(stub.Step(pb.StepRequest(session_id=child.session_id, action="x",
                                                  expected_turn=2), metadata=MD)) == \
        grpc.StatusCode.ABORTED
    again = await stub.Step(pb.StepRequest(session_id=child.session_id, action="b4",
                                           expected_turn=3), metadata=MD)
    assert again.replayed and again.turn == 4


async def test_fork_trees_of_any_depth_survive_closed_ancestors(echo) -> None:  # type: ignore[no-untyped-def]
    stub, _, gw = echo
    root = await new_session(stub)
    await walk(stub, root.session_id, ["r1", "r2"])
    sid, expected = root.session_id, ["r1", "r2"]
    chain = [root.session_id]
    for depth in range(6):  # each level forks at the full history, then adds one turn
        child = await stub.ForkSession(pb.ForkSessionRequest(session_id=sid), metadata=MD)
        await walk(stub, child.session_id, [f"d{depth}"], start=len(expected))
        expected = [*expected, f"d{depth}"]
        sid = child.session_id
        chain.append(sid)
    # a fork in the middle of an inherited segment
    mid = await stub.ForkSession(pb.ForkSessionRequest(session_id=sid, at_turn=3), metadata=MD)
    assert [a for a, _ in await history(stub, mid.session_id)] == ["r1", "r2", "d0"]
    empty = await stub.ForkSession(pb.ForkSessionRequest(session_id=sid, at_turn=0), metadata=MD)
    assert await history(stub, empty.session_id) == []
    # closing every ancestor breaks no descendant
    for depth, ancestor in enumerate(chain[:-1]):  # each reports inherited + own turns
        closed = await stub.CloseSession(pb.CloseSessionRequest(session_id=ancestor), metadata=MD)
        assert closed.turn_count == 2 + depth
    assert [a for a, _ in await history(stub, sid)] == expected
    await walk(stub, sid, ["last"], start=len(expected))
    assert [a for a, _ in await history(stub, mid.session_id)] == ["r1", "r2", "d0"]
    closed = await stub.CloseSession(pb.CloseSessionRequest(session_id=mid.session_id),
                                     metadata=MD)
    assert closed.turn_count == 3  # all inherited
    # a fork copies no turn: the child has no turn list of its own until it steps
    client = gw.store.client  # type: ignore[attr-defined]
    keys = [k async for k in client.scan_iter(match=f"*{empty.session_id}*")]
    assert [k.decode().rsplit(":", 1)[-1] for k in keys] == ["meta"]


async def test_an_ancestors_turns_stay_alive_while_a_fork_uses_them(echo) -> None:  # type: ignore[no-untyped-def]
    stub, _, _ = echo
    parent = await new_session(stub, ttl_seconds=3)
    await walk(stub, parent.session_id, ["p1"])
    child = await stub.ForkSession(pb.ForkSessionRequest(session_id=parent.session_id),
                                   metadata=MD)
    await stub.CloseSession(pb.CloseSessionRequest(session_id=parent.session_id), metadata=MD)
    await asyncio.sleep(2)
    await walk(stub, child.session_id, ["c2"], start=1)  # refreshes the parent's turn list too
    await asyncio.sleep(2)  # the parent's list would have expired by now without that
    assert [a for a, _ in await history(stub, child.session_id)] == ["p1", "c2"]


async def test_fork_quota_and_isolation(key_prefix: str, redis_url: str) -> None:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        dev_tenant="fork-limits", max_sessions_per_tenant=2)
    async with running_gateway(settings, redis_url, EchoBackend()) as gw, stub_for(gw) as stub:
        parent = await new_session(stub)
        await stub.ForkSession(pb.ForkSessionRequest(session_id=parent.session_id), metadata=MD)
        assert await code_of(stub.ForkSession(pb.ForkSessionRequest(
            session_id=parent.session_id), metadata=MD)) == grpc.StatusCode.RESOURCE_EXHAUSTED
    other = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=OTHER_KEY,
                     dev_tenant="fork-other")
    async with running_gateway(other, redis_url, EchoBackend()) as gw, stub_for(gw) as stub:
        md = auth(OTHER_KEY)
        sid = parent.session_id
        assert await code_of(stub.ForkSession(pb.ForkSessionRequest(session_id=sid),
                                              metadata=md)) == grpc.StatusCode.NOT_FOUND
        assert await code_of(stub.ExportTrajectory(pb.ExportTrajectoryRequest(session_id=sid),
                                                   metadata=md)) == grpc.StatusCode.NOT_FOUND
        batch = await stub.BatchStep(pb.BatchStepRequest(steps=[pb.StepRequest(
            session_id=sid, action="ls")]), metadata=md)
        assert batch.items[0].code == grpc.StatusCode.NOT_FOUND.value[0]


# --- batch and counterfactual steps ---

async def test_batch_steps_keep_order_and_report_each_item(echo) -> None:  # type: ignore[no-untyped-def]
    stub, _, _ = echo
    a, b = await new_session(stub), await new_session(stub)
    reply = await stub.BatchStep(pb.BatchStepRequest(steps=[
        pb.StepRequest(session_id=a.session_id, action="a1"),
        pb.StepRequest(session_id=b.session_id, action="b1"),
        pb.StepRequest(session_id="s_missing", action="x"),
        pb.StepRequest(session_id=a.session_id, action="a2"),
        pb.StepRequest(session_id=b.session_id, action="b2", expected_turn=0),
    ]), metadata=MD)
    assert [i.request_index for i in reply.items] == [0, 1, 2, 3, 4]
    codes = [grpc.StatusCode.OK.value[0]] * 2 + [grpc.StatusCode.NOT_FOUND.value[0],
                                                 grpc.StatusCode.OK.value[0],
                                                 grpc.StatusCode.ABORTED.value[0]]
    assert [i.code for i in reply.items] == codes
    assert reply.items[3].response.turn == 2 and reply.items[3].response.observation == "did: a2"
    assert [x for x, _ in await history(stub, a.session_id)] == ["a1", "a2"]
    assert [x for x, _ in await history(stub, b.session_id)] == ["b1"]


async def test_counterfactual_previews_store_nothing(echo) -> None:  # type: ignore[no-untyped-def]
    stub, _, _ = echo
    s = await new_session(stub, seed=9)
    await walk(stub, s.session_id, ["first"])
    candidates = ["rm -rf x", "ls", "cat y"]
    reply = await stub.BatchStep(pb.BatchStepRequest(steps=[
        pb.StepRequest(session_id=s.session_id, action=c, expected_turn=1) for c in candidates],
        commit=False, samples=2), metadata=MD)
    assert len(reply.items) == 6
    assert [(i.request_index, i.sample_index) for i in reply.items] == [
        (0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(i.code == 0 and i.response.preview and i.response.turn == 2 for i in reply.items)
    assert [i.response.observation for i in reply.items[::2]] == [f"did: {c}" for c in candidates]
    assert reply.items[0].response.seed != reply.items[1].response.seed
    assert (await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id),
                                  metadata=MD)).turn_count == 1
    # committing a candidate afterwards samples with the seed that preview sample 0 used
    done = await stub.Step(pb.StepRequest(session_id=s.session_id, action="ls", expected_turn=1),
                           metadata=MD)
    assert done.seed == reply.items[2].response.seed and not done.preview
    for bad in (pb.BatchStepRequest(steps=[pb.StepRequest(session_id=s.session_id, action="x")],
                                    samples=3),  # samples need commit=false
                pb.BatchStepRequest(steps=[pb.StepRequest(session_id=s.session_id, action="x")]
                                    * 40, commit=False, samples=2),  # over 64 items
                pb.BatchStepRequest()):
        assert await code_of(stub.BatchStep(bad, metadata=MD)) == grpc.StatusCode.INVALID_ARGUMENT


# --- faults ---

async def test_scheduled_faults_are_instructed_and_labelled(echo) -> None:  # type: ignore[no-untyped-def]
    stub, backend, _ = echo
    s = await new_session(stub, pb.MCP, faults=pb.FaultPolicy(kinds=["http_500"], turns=[2]))
    r1 = await stub.Step(pb.StepRequest(session_id=s.session_id, action='{"tool": "a"}'),
                         metadata=MD)
    assert r1.fault_kind == "" and "Fault injection" not in backend.prompts[-1]
    r2 = await stub.Step(pb.StepRequest(session_id=s.session_id, action='{"tool": "b"}'),
                         metadata=MD)
    assert r2.fault_kind == "http_500"
    assert "[Fault injection: http_500]" in backend.prompts[-1]
    got = await stub.GetSession(pb.GetSessionRequest(session_id=s.session_id, include_turns=True),
                                metadata=MD)
    assert [t.fault_kind for t in got.turns] == ["", "http_500"]
    exported = await stub.ExportTrajectory(pb.ExportTrajectoryRequest(session_id=s.session_id),
                                           metadata=MD)
    lines = [json.loads(x) for x in exported.content.decode().splitlines()]
    assert [x["worldserve"]["turn"]["fault_kind"] for x in lines] == ["", "http_500"]
    assert exported.metadata["fault_turns"] == 1


async def test_fault_rates_are_reproducible_and_checked(echo) -> None:  # type: ignore[no-untyped-def]
    stub, _, _ = echo
    policy = pb.FaultPolicy(rate=0.5, seed=42)
    kinds = []
    for _ in range(2):
        s = await new_session(stub, pb.WEB, faults=policy)
        reply = await stub.BatchStep(pb.BatchStepRequest(steps=[
            pb.StepRequest(session_id=s.session_id, action=f"click {i}") for i in range(12)]),
            metadata=MD)
        kinds.append([i.response.fault_kind for i in reply.items])
    assert kinds[0] == kinds[1]  # same policy seed, same faults on the same turns
    assert 0 < sum(bool(k) for k in kinds[0]) < 12
    assert {k for k in kinds[0] if k} <= {"timeout", "http_500", "http_429", "permission_denied",
                                          "truncated_output", "stale_data",
                                          "network_unreachable"}
    for bad in (pb.FaultPolicy(kinds=["malformed_json"], rate=1),  # not a Terminal fault
                pb.FaultPolicy(kinds=["meteor_strike"], rate=1), pb.FaultPolicy(rate=1.5)):
        assert await code_of(new_session(stub, pb.TERMINAL, faults=bad)) == \
            grpc.StatusCode.INVALID_ARGUMENT


# --- export, import, replay ---

async def test_export_a_fork_tree_and_import_it_back(echo) -> None:  # type: ignore[no-untyped-def]
    stub, _, _ = echo
    root = await new_session(stub, task_instruction="tidy up", initial_state="cwd /home/agent")
    await walk(stub, root.session_id, ["ls", "cat notes.txt"])
    fork = await stub.ForkSession(pb.ForkSessionRequest(session_id=root.session_id, at_turn=1),
                                  metadata=MD)
    await walk(stub, fork.session_id, ["pwd"], start=1)
    out = await stub.ExportTrajectory(pb.ExportTrajectoryRequest(
        session_id=root.session_id, include_forks=True), metadata=MD)
    assert out.format == "agentworldbench" and out.metadata["sessions"] == 2
    lines = [json.loads(x) for x in out.content.decode().splitlines()]
    assert len(lines) == 4  # 2 turns of the root + 2 of the fork
    last = lines[1]
    assert last["task"] == "terminal" and last["turn_idx"] == 2 and last["total_turns"] == 2
    assert last["response"] == ["did: ls", "did: cat notes.txt"]
    assert last["current_prompt"] == last["prompt"][-1] and "**Action:** cat notes.txt" in \
        last["current_prompt"] and "tidy up" in last["prompt"][0]
    assert last["system_str"] and lines[3]["worldserve"]["parent_session_id"] == root.session_id
    as_json = await stub.ExportTrajectory(pb.ExportTrajectoryRequest(
        session_id=root.session_id, format="json"), metadata=MD)
    doc = json.loads(as_json.content)
    assert doc["sessions"][0]["turns"][1]["observation"] == "did: cat notes.txt"
    assert await code_of(stub.ExportTrajectory(pb.ExportTrajectoryRequest(
        session_id=root.session_id, format="xml"), metadata=MD)) == grpc.StatusCode.INVALID_ARGUMENT

    # the root's full-history record starts a new session from that (real) history
    imported = await stub.ImportTrajectory(pb.ImportTrajectoryRequest(
        content=json.dumps(last).encode()), metadata=MD)
    assert imported.turn_count == 2 and imported.domain == pb.TERMINAL
    assert imported.task_instruction == "tidy up" and imported.initial_state == "cwd /home/agent"
    got = await stub.GetSession(pb.GetSessionRequest(session_id=imported.session_id,
                                                     include_turns=True), metadata=MD)
    assert [(t.action, t.observation, t.imported) for t in got.turns] == [
        ("ls", "did: ls", True), ("cat notes.txt", "did: cat notes.txt", True)]
    step = await stub.Step(pb.StepRequest(session_id=imported.session_id, action="wc -l notes.txt",
                                          expected_turn=2), metadata=MD)
    assert step.turn == 3
    # a foreign record whose prompts are plain actions
    foreign = {"task": "search", "id": "x1", "prompt": ["query: cats", "open result 1"],
               "response": ["3 results"], "system_str": "You are a search engine."}
    s2 = await stub.ImportTrajectory(pb.ImportTrajectoryRequest(
        content=json.dumps(foreign).encode()), metadata=MD)
    assert s2.turn_count == 1 and s2.domain == pb.SEARCH
    assert s2.system_prompt == "You are a search engine."
    for bad in (b"not json", b'{"task": "chess", "prompt": [], "response": []}'):
        assert await code_of(stub.ImportTrajectory(pb.ImportTrajectoryRequest(content=bad),
                                                    metadata=MD)) == \
            grpc.StatusCode.INVALID_ARGUMENT


async def test_replay_reports_per_turn_differences(key_prefix: str, redis_url: str) -> None:
    from worldserve.sdk import Client
    from worldserve.sdk.replay import replay

    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY)
    async with running_gateway(settings, redis_url, EchoBackend()) as gw:
        def run() -> tuple[object, object]:
            with Client(f"127.0.0.1:{gw.port}", api_key=TEST_KEY) as client:
                s = client.create_session("TERMINAL", seed=3)
                for action in ("ls", "pwd", "whoami"):
                    client.step(s.session_id, action)
                same = replay(client, s.session_id)
                # tamper with the recording: the replay must notice the difference
                r = redis.Redis.from_url(redis_url)
                key = next(k for k in r.scan_iter(f"{key_prefix}:*{s.session_id}*:turns"))
                turn = json.loads(r.lindex(key, 1))  # type: ignore[arg-type]
                turn["observation"] = "something else"
                r.lset(key, 1, json.dumps(turn))
                r.close()
                changed = replay(client, s.session_id)
                return same, changed

        same, changed = await asyncio.to_thread(run)
    assert same.exact_rate == 1.0 and len(same.diffs) == 3  # type: ignore[attr-defined]
    assert [d.exact for d in changed.diffs] == [True, False, True]  # type: ignore[attr-defined]
    assert changed.diffs[1].similarity < 0.5  # type: ignore[attr-defined]
