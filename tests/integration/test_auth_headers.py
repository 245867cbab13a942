"""A request must carry exactly one bearer key: with two, which one is meant is not guessed."""

from __future__ import annotations

import grpc
import pytest

from tests.conftest import OTHER_KEY, TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import auth, code_of, running_gateway, stub_for
from worldserve.settings import Settings
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration


async def test_two_authorization_headers_are_refused(key_prefix: str, redis_url: str) -> None:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY)
    async with running_gateway(settings, redis_url, EchoBackend()) as gw, stub_for(gw) as stub:
        req = pb.CreateSessionRequest(domain=pb.TERMINAL)
        assert await code_of(stub.CreateSession(req, metadata=auth(TEST_KEY))) == \
            grpc.StatusCode.OK
        for twice in (auth(TEST_KEY) + auth(TEST_KEY), auth(OTHER_KEY) + auth(TEST_KEY),
                      auth(TEST_KEY) + auth(OTHER_KEY)):
            assert await code_of(stub.CreateSession(req, metadata=twice)) == \
                grpc.StatusCode.UNAUTHENTICATED
