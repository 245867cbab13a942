"""Redis failures as the platform's error (one place): unreachable or failing -> StoreUnavailable.

Every Redis call of the session store and the quota counters goes through ``guard``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worldserve.errors import StoreUnavailable

T = TypeVar("T")


async def guard(call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailable(f"session store unreachable: {exc}") from exc
    except RedisError as exc:
        raise StoreUnavailable(f"session store error: {exc}") from exc
