"""Through the gateway: a session's later turns reuse the KV of its earlier ones on the real
model server (read from the engine's Prometheus metrics)."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ENGINE_METRICS, TEST_KEY
from tests.integration.helpers import auth, running_gateway, stub_for
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration


def engine_counters(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


async def test_later_turns_prefill_only_their_new_tokens(make_settings, redis_url: str,  # type: ignore[no-untyped-def]
                                                         triton_url: str) -> None:
    url = ENGINE_METRICS[triton_url]
    md = auth(TEST_KEY)
    settings = make_settings(history_window_turns=4, history_window_stride=4)
    async with running_gateway(settings, redis_url) as gw, stub_for(gw) as stub:
        s = await stub.CreateSession(pb.CreateSessionRequest(
            domain=pb.TERMINAL, initial_state="empty home directory",
            sampling=pb.SamplingParams(max_tokens=48)), metadata=md)
        per_turn = []
        for turn in range(4):
            before = engine_counters(url)
            await stub.Step(pb.StepRequest(session_id=s.session_id, action=f"mkdir d{turn}",
                                           expected_turn=turn), metadata=md)
            after = engine_counters(url)
            per_turn.append({k: after[k] - before.get(k, 0.0) for k in after})
    first, *later = per_turn
    assert first["worldserve_engine_prompt_tokens_total"] > 0
    for delta in later:  # each later prompt starts with the previous one: only the new part runs
        prompt = delta["worldserve_engine_prompt_tokens_total"]
        prefilled = delta["worldserve_engine_prefilled_tokens_total"]
        assert delta["worldserve_prefix_cache_hits_total"] >= 1
        assert prefilled < prompt / 2, (prefilled, prompt)
        assert delta["worldserve_prefix_cache_reused_tokens_total"] >= prompt - prefilled
    assert engine_counters(url)["worldserve_prefix_cache_bytes"] > 0
