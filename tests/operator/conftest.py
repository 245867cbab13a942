"""Shared operator fixtures: kmock as the Kubernetes API, the real Redis for the registry."""

from __future__ import annotations

import uuid

import pytest
import redis
from kubernetes import client

from worldserve_operator.kube import Kube
from worldserve_operator.reconcile import WorldModelReconciler
from worldserve_operator.registry import Registry

ISVC = "serving.kserve.io/v1beta1/inferenceservices"
CM = "v1/configmaps"
LLMISVC = "serving.kserve.io/v1alpha2/llminferenceservices"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world(kmock, redis_url: str):  # type: ignore[no-untyped-def]
    kmock.resources[ISVC] = {}
    kmock.resources[CM] = {}
    kmock.resources[LLMISVC] = {}
    cfg = client.Configuration()
    cfg.host = str(kmock.url).rstrip("/")
    api = client.ApiClient(cfg)
    prefix = f"wsop-{uuid.uuid4().hex[:6]}"
    r = redis.Redis.from_url(redis_url)
    clock = Clock()
    rec = WorldModelReconciler(Kube(api), Registry(r, prefix), clock)
    yield kmock, rec, Registry(r, prefix), clock, api
    for key in r.scan_iter(f"{prefix}:*"):
        r.delete(key)
    r.close()


