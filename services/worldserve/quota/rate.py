"""Refusals per second per API key: a client that keeps asking what is refused is slowed (pure).

A refusal (the request as sent cannot be served: invalid, over a quota, not found …) is cheap
for the gateway, so a client looping on one asks again at once: before this, a client resending
an oversized prompt made ~300 requests a second through the event loop that every other
session's steps share. Each key has a token bucket: ``burst`` refusals go back at once, after
that a refusal waits until the bucket would hold its token (``rate`` per second), like a
``limit_req`` queue. Waiting costs the gateway nothing (the request sleeps), and a client that
waits for its answer before asking again is held to ``rate`` refusals a second. Successful
requests are never held. Buckets live in one gateway process: N replicas allow N times the rate
(docs/ARCHITECTURE.md §5).
"""

from __future__ import annotations

from collections import OrderedDict


class RefusalPacer:
    """Token buckets by key; at most ``max_keys`` are kept (the longest idle goes first, and
    comes back full). A bucket owes at most ``max_delay_s`` worth of refusals: the wait of one
    refusal never exceeds it, however many arrive at once."""

    def __init__(self, rate: float, burst: float, max_delay_s: float = 2.0,
                 max_keys: int = 100_000) -> None:
        if rate <= 0 or burst < 1 or max_delay_s <= 0:
            raise ValueError(f"pacing needs rate > 0, burst >= 1 and max_delay_s > 0 "
                             f"(got {rate}, {burst}, {max_delay_s})")
        self.rate, self.burst, self.max_delay_s, self.max_keys = rate, burst, max_delay_s, max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key → (tokens, t)

    def delay(self, key: str, now: float) -> float:
        """Take a token for one refusal of ``key``; the seconds to hold that refusal (0 = none)."""
        tokens, then = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + max(now - then, 0.0) * self.rate) - 1.0
        tokens = max(tokens, -self.rate * self.max_delay_s)
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return -tokens / self.rate if tokens < 0 else 0.0
