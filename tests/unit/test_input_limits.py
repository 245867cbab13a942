"""The pure input checks: labels, admin strings and numbers, periods, echoed input, imports."""

from __future__ import annotations

import datetime as dt

import pytest

from worldserve.errors import ECHO_CHARS, MESSAGE_CHARS, InvalidArgument, capped, echo
from worldserve.sessions.limits import MAX_LABEL_KEY_BYTES, MAX_LABELS, check_labels, utf8_size
from worldserve.sessions.trajectory import parse_agentworldbench
from worldserve.tenancy import inputs
from worldserve.tenancy.records import QuotaSpec


def test_echo_and_capped_keep_messages_short() -> None:
    assert echo("s_abc") == "s_abc"
    long = echo("x" * 10_000)
    assert len(long) < ECHO_CHARS + 40 and long.endswith("(10000 characters)")
    assert len(capped("y" * 100_000)) == MESSAGE_CHARS + 1
    assert capped("short") == "short"


def test_labels_limits() -> None:
    assert check_labels(None) == {}
    assert check_labels({"a": "b"}) == {"a": "b"}
    with pytest.raises(InvalidArgument, match="at most"):
        check_labels({str(i): "" for i in range(MAX_LABELS + 1)})
    with pytest.raises(InvalidArgument, match="key"):
        check_labels({"é" * (MAX_LABEL_KEY_BYTES // 2 + 1): "v"})  # counted in UTF-8 bytes
    with pytest.raises(InvalidArgument, match="empty"):
        check_labels({"": "v"})
    assert utf8_size("é") == 2


@pytest.mark.parametrize("value", ["", "a" * 65, "a b", "t\x00", "ténant"])
def test_bad_tenant_ids(value: str) -> None:
    with pytest.raises(InvalidArgument):
        inputs.tenant_id(value)


def test_admin_strings_numbers_and_periods() -> None:
    assert inputs.tenant_id("acme-1.prod_x") == "acme-1.prod_x"
    with pytest.raises(InvalidArgument, match="NUL"):
        inputs.text("display_name", "a\x00b")
    with pytest.raises(InvalidArgument, match="bytes"):
        inputs.text("display_name", "x" * (inputs.TEXT_MAX_BYTES + 1))
    with pytest.raises(InvalidArgument, match="max_sessions"):
        inputs.quota(QuotaSpec(max_sessions=-1))
    with pytest.raises(InvalidArgument, match="max_inflight_steps"):
        inputs.quota(QuotaSpec(max_inflight_steps=2**31))
    with pytest.raises(InvalidArgument, match="allowed_models"):
        inputs.quota(QuotaSpec(allowed_models=("m",) * (inputs.LIST_MAX + 1)))
    assert inputs.quota(QuotaSpec(tokens_per_minute=2**63 - 1)).tokens_per_minute == 2**63 - 1
    now = dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
    assert inputs.period(now, now + dt.timedelta(hours=1))[0] == now
    with pytest.raises(InvalidArgument, match="after"):
        inputs.period(now, now)
    with pytest.raises(InvalidArgument, match="start"):
        inputs.period(dt.datetime(1, 1, 1, tzinfo=dt.UTC), now)


@pytest.mark.parametrize("turn_idx", ["1e400", "NaN", "-Infinity", "2.5", '"3"', "true",
                                      "9007199254740993"])
def test_import_turn_idx_must_be_a_safe_integer(turn_idx: str) -> None:
    line = f'{{"task": "terminal", "turn_idx": {turn_idx}, "prompt": ["ls"], "response": ["a"]}}'
    with pytest.raises(ValueError, match=r"turn_idx|JSON number"):
        parse_agentworldbench(line)


def test_import_rejects_deep_nesting_and_surrogates_but_keeps_json_values() -> None:
    deep = '{"task": "mcp", "prompt": ["x"], "response": [' + "[" * 50_000 + "]" * 50_000 + "]}"
    with pytest.raises(ValueError, match="deeply"):
        parse_agentworldbench(deep)
    with pytest.raises(ValueError, match="Unicode"):
        parse_agentworldbench('{"task": "mcp", "prompt": ["\\ud800"], "response": ["a"]}')
    parsed = parse_agentworldbench('{"task": "mcp", "prompt": ["call"], "response": [{"a": 1}]}')
    assert parsed.turns[0].observation == '{"a": 1}'
