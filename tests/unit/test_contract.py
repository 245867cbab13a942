from __future__ import annotations

import json

import pytest

from worldserve.modelserver.contract import BadSamplingParameters, parse_sampling, sampling_json


def test_round_trip_of_the_gateways_sampling_json() -> None:
    req = parse_sampling("p", sampling_json(64, 0.7, 0.9, 11))
    assert (req.max_tokens, req.temperature, req.top_p, req.seed) == (64, 0.7, 0.9, 11)


def test_defaults_and_stop_strings() -> None:
    req = parse_sampling("p", json.dumps({"stop": "END"}), default_max_tokens=9)
    assert req.max_tokens == 9 and req.stop == ("END",) and req.temperature == 0.0
    assert parse_sampling("p", None).seed is None


@pytest.mark.parametrize("raw", ["{", "[1]", '{"max_tokens": 0}', '{"temperature": -1}',
                                 '{"top_p": 0}', '{"max_tokens": "many"}'])
def test_bad_sampling_parameters_are_refused(raw: str) -> None:
    with pytest.raises(BadSamplingParameters):
        parse_sampling("p", raw)


def test_the_engine_leaves_a_core_to_everyone_else_unless_told() -> None:
    from worldserve.modelserver.port import cpu_threads

    assert cpu_threads(0, usable_cores=2, torch_default=2) == 1
    assert cpu_threads(0, usable_cores=1, torch_default=1) == 1  # never none
    assert cpu_threads(0, usable_cores=16, torch_default=8) == 8  # not past the physical cores
    assert cpu_threads(0, usable_cores=8, torch_default=8) == 7
    assert cpu_threads(3, usable_cores=2, torch_default=2) == 3  # the setting wins
