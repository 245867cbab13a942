from __future__ import annotations

from worldserve.sessions.records import Sampling, SessionRecord, TurnRecord
from worldserve.sessions.rules import Verdict, admit


def turn(action: str) -> TurnRecord:
    return TurnRecord(action, "obs", "", 1, 2, 1, "m@1", "stop", 0.0)


def test_apply_when_expected_matches_or_is_unset() -> None:
    turns = [turn("ls")]
    assert admit(turns, "pwd", 1, 10).verdict is Verdict.APPLY
    assert admit(turns, "pwd", None, 10).verdict is Verdict.APPLY


def test_retry_of_an_applied_step_replays_the_stored_turn() -> None:
    turns = [turn("ls"), turn("cat a")]
    verdict = admit(turns, "cat a", 1, 10)
    assert verdict.verdict is Verdict.REPLAY
    assert verdict.stored is turns[1] and verdict.stored_index == 2


def test_mismatch_with_another_action_is_a_conflict() -> None:
    turns = [turn("ls"), turn("cat a")]
    assert admit(turns, "rm a", 1, 10).verdict is Verdict.CONFLICT
    assert admit(turns, "ls", 5, 10).verdict is Verdict.CONFLICT  # from the future


def test_turn_limit() -> None:
    assert admit([turn("a"), turn("b")], "c", 2, 2).verdict is Verdict.LIMIT


def test_records_round_trip_through_json() -> None:
    record = SessionRecord("s_1", "t", "TERMINAL", "m@1", "task", "st", "sys",
                           Sampling(0.0, 1.0, 64), 7, {}, {"a": "b"}, 60, 1.5)
    assert SessionRecord.from_json(record.to_json()) == record
    t = turn("ls")
    assert TurnRecord.from_json(t.to_json()) == t


def test_admission_over_the_latest_turns_only() -> None:
    from worldserve.sessions.rules import needs_older

    tail = [turn("t7"), turn("t8"), turn("t9")]  # turns 7..9 (0-based) of ten
    assert admit(tail, "x", 10, 20, first_index=7).verdict is Verdict.APPLY
    replay = admit(tail, "t8", 8, 20, first_index=7)
    assert replay.verdict is Verdict.REPLAY and replay.stored is tail[1]
    assert replay.stored_index == 9
    assert admit(tail, "x", 9, 20, first_index=7).verdict is Verdict.CONFLICT
    assert admit(tail, "x", 10, 10, first_index=7).verdict is Verdict.LIMIT
    assert needs_older(3, 7) and not needs_older(7, 7) and not needs_older(None, 7)


def test_keyspace_spells_every_key_with_its_hash_tag() -> None:
    from worldserve.keyspace import Keyspace

    ks = Keyspace("ws")
    s = ks.session("acme", "s_1")
    assert (s.meta, s.turns, s.forks) == ("ws:{t:acme:s:s_1}:meta", "ws:{t:acme:s:s_1}:turns",
                                          "ws:{t:acme:s:s_1}:forks")
    assert ks.tenant_sessions("acme") == "ws:{t:acme}:sessions"
    q = ks.quota("acme")
    assert (q.inflight, q.reserved, q.used("202612"), q.tpm(7)) == (
        "ws:{q:acme}:inflight", "ws:{q:acme}:reserved", "ws:{q:acme}:used:202612",
        "ws:{q:acme}:tpm:7")
    assert (ks.usage_stream, ks.usage_served, ks.usage_dead) == (
        "ws:usage", "ws:usage:served", "ws:usage:dead")
    assert (ks.registry_models, ks.registry_aliases, ks.registry_changed) == (
        "ws:registry:models", "ws:registry:aliases", "ws:registry:changed")
