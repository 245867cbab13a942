"""Requests per second per API key: a token bucket per key, in one gateway process (pure).

A key may send ``burst`` requests at once and ``rate`` per second after that. A refused request
learns how long until the bucket holds a whole token again (``RetryInfo``). Buckets live in the
gateway's memory, like a local rate limit in Envoy: with N gateway replicas a key may reach N
times the rate, and a restart forgets the buckets (docs/ARCHITECTURE.md §5). Why it exists: a
client that loops on cheap refusals (an oversized prompt, a quota) floods the event loop that
every other session's steps share.
"""

from __future__ import annotations

from collections import OrderedDict


class RequestRate:
    """Token buckets by key; at most ``max_keys`` are kept (the longest idle is dropped first,
    and a dropped bucket was full or nearly so: it comes back full)."""

    def __init__(self, rate: float, burst: float, max_keys: int = 100_000) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a request rate needs rate > 0 and burst >= 1 (got {rate}, {burst})")
        self.rate, self.burst, self.max_keys = rate, burst, max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key → (tokens, t)

    def admit(self, key: str, now: float) -> float:
        """0 when the request may go ahead (a token is taken); else the seconds to wait."""
        tokens, then = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + max(now - then, 0.0) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[key] = (tokens, now)
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait
