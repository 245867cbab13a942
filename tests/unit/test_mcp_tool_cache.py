"""The MCP front door's cache of declared tools (pure: a stub loader stands for the gateway)."""

from __future__ import annotations

import asyncio

import pytest
from mcp.shared.exceptions import MCPError

from worldserve.domains.tools import ToolSpec
from worldserve.frontends.mcp import Binding, DeclaredTools


def test_tools_are_kept_per_key_and_session_for_a_while_and_refusals_are_not_kept() -> None:
    calls: list[Binding] = []
    refuse = {Binding("s-gone", "k1")}

    async def load(b: Binding) -> list[ToolSpec]:
        calls.append(b)
        if b in refuse:
            raise MCPError(-32602, "NOT_FOUND: session")
        return [ToolSpec(f"tool_{b.session_id}", "", {"type": "object"})]

    now = [0.0]
    cache = DeclaredTools(load, size=2, ttl_s=60.0, clock=lambda: now[0])

    async def run() -> None:
        a, b, c = Binding("s1", "k1"), Binding("s1", "k2"), Binding("s2", "k1")
        assert (await cache.get(a))[0].name == "tool_s1"
        await cache.get(a)
        assert calls == [a]  # the second call is answered from the cache
        await cache.get(b)  # another key: asked again, the gateway judges that key
        assert calls == [a, b]
        await cache.get(c)  # size 2: the least recently used (a) goes
        await cache.get(a)
        assert calls == [a, b, c, a]
        for _ in range(2):
            with pytest.raises(MCPError):
                await cache.get(Binding("s-gone", "k1"))
        assert calls[-2:] == [Binding("s-gone", "k1")] * 2  # a refusal is asked again
        n = len(calls)
        now[0] = 59.0
        await cache.get(a)
        assert len(calls) == n  # still fresh
        now[0] = 61.0
        await cache.get(a)
        assert calls[-1] == a and len(calls) == n + 1  # expired: the gateway is asked again

    asyncio.run(run())
