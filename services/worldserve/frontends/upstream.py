"""The gateway as a front door sees it: one gRPC channel, a client per caller's key.

A front door holds no credentials of its own: each request's bearer key is passed on, so the
gateway authenticates it and tenants, quotas and usage apply unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from worldserve.errors import ResourceExhausted, WorldserveError
from worldserve.sdk import AsyncClient


def bearer_key(header: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header, or None."""
    if not header:
        return None
    scheme, _, key = header.strip().partition(" ")
    key = key.strip()
    return key if scheme.lower() == "bearer" and key else None


def describe_error(exc: WorldserveError) -> dict[str, Any]:
    """What a front door tells its client about a gateway error: status, message, retry hint."""
    info: dict[str, Any] = {"status": exc.code_name, "message": str(exc)}
    if isinstance(exc, ResourceExhausted):
        info["subject"] = exc.subject
        info["retry_after_s"] = exc.retry_after_s
    return info


@dataclass
class Upstream:
    """One channel to the gateway, shared by every caller (clients are cheap stubs over it)."""

    target: str
    timeout_s: float = 300.0
    credentials: grpc.ChannelCredentials | None = None

    def __post_init__(self) -> None:
        self._channel: grpc.aio.Channel | None = None

    def client(self, api_key: str) -> AsyncClient:
        if self._channel is None:  # created inside the serving event loop
            self._channel = (grpc.aio.secure_channel(self.target, self.credentials)
                             if self.credentials else grpc.aio.insecure_channel(self.target))
        return AsyncClient(api_key=api_key, channel=self._channel, timeout_s=self.timeout_s)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
