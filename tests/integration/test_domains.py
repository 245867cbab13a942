"""A model serves the domains its card declares: other domains are refused, ListModels shows them."""

from __future__ import annotations

import json

import grpc
import pytest

from tests.conftest import TEST_KEY
from tests.integration.backends import EchoBackend
from tests.integration.helpers import admin_stub_for, auth, running_gateway, stub_for
from worldserve.settings import Settings
from worldserve.v1 import admin_pb2
from worldserve.v1 import simulator_pb2 as pb

pytestmark = pytest.mark.integration
ADMIN_KEY = "domains-admin-key"


async def test_the_default_checkpoint_serves_only_what_its_card_declares(
        key_prefix: str, redis_url: str) -> None:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        admin_api_key=ADMIN_KEY)  # model_dir: the committed checkpoint
    async with running_gateway(settings, redis_url, EchoBackend()) as gw, stub_for(gw) as stub:
        for domain in (pb.TERMINAL, pb.MCP):
            s = await stub.CreateSession(pb.CreateSessionRequest(domain=domain),
                                         metadata=auth(TEST_KEY))
            assert s.session_id
        for domain in (pb.SEARCH, pb.WEB, pb.OS, pb.ANDROID, pb.SWE):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.CreateSession(pb.CreateSessionRequest(domain=domain),
                                         metadata=auth(TEST_KEY))
            assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "TERMINAL, MCP" in (info.value.details() or "")
        # an imported trajectory of another domain is refused the same way
        record = {"task": "search", "prompt": ["query: cats"], "response": ["3 results"]}
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.ImportTrajectory(pb.ImportTrajectoryRequest(
                content=json.dumps(record).encode()), metadata=auth(TEST_KEY))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        async with admin_stub_for(gw) as admin:
            models = await admin.ListModels(admin_pb2.ListModelsRequest(),
                                            metadata=auth(ADMIN_KEY))
        assert [(m.version, list(m.domains)) for m in models.models] == [
            (settings.model_version_label, ["TERMINAL", "MCP"])]


async def test_a_setting_overrides_the_card(key_prefix: str, redis_url: str) -> None:
    settings = Settings(gateway_port=0, key_prefix=key_prefix, dev_api_key=TEST_KEY,
                        model_domains=["search"])
    async with running_gateway(settings, redis_url, EchoBackend()) as gw, stub_for(gw) as stub:
        s = await stub.CreateSession(pb.CreateSessionRequest(domain=pb.SEARCH),
                                     metadata=auth(TEST_KEY))
        assert s.session_id
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.CreateSession(pb.CreateSessionRequest(domain=pb.TERMINAL),
                                     metadata=auth(TEST_KEY))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
