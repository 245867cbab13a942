"""The gateway process runs on uvloop unless told otherwise."""

from __future__ import annotations

import asyncio

import uvloop

from worldserve.gateway.server import loop_factory
from worldserve.settings import Settings


def test_the_gateway_runs_on_uvloop_by_default_and_asyncio_on_request() -> None:
    assert Settings().event_loop == "uvloop"
    factory = loop_factory("uvloop")
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    assert loop_factory("asyncio") is None
    with asyncio.Runner(loop_factory=loop_factory("asyncio")) as runner:
        assert not isinstance(runner.get_loop(), uvloop.Loop)
