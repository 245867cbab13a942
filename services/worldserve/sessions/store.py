"""Sessions in Redis: metadata + an append-only turn list, idle TTL, tenant-scoped keys.

Key layout (the ``{…}`` hash tag keeps a session's keys in one cluster slot, so the Lua commit
is atomic on Redis Cluster too; the tenant is part of every key, so another tenant's id simply
does not resolve):

    {prefix}:{t:<tenant>:s:<sid>}:meta   JSON SessionRecord          (EX idle TTL)
    {prefix}:{t:<tenant>:s:<sid>}:turns  list of JSON TurnRecord     (EX idle TTL)
    {prefix}:{t:<tenant>}:sessions       zset sid -> expiry (epoch s), for limits and listing
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worldserve.errors import StoreUnavailable
from worldserve.quota.lua import SETTLE_FN
from worldserve.sessions.records import SessionRecord, TurnRecord

T = TypeVar("T")

_ADMIT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
return 1
"""

# KEYS: meta, turns[, 6 settle keys]. ARGV: expected (-1 = any), turn json, action, ttl,
# max_turns[, 4 settle args]. With the settle part (quota.counters), the step's reservation is
# settled and its usage event written in the same atomic call, whatever the outcome.
_COMMIT_BODY = """
local function commit()
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing', '0'} end
  local n = redis.call('LLEN', KEYS[2])
  local expected = tonumber(ARGV[1])
  if expected >= 0 and n ~= expected then
    if n > expected then
      local stored = redis.call('LINDEX', KEYS[2], expected)
      if cjson.decode(stored)['action'] == ARGV[3] then return {'replay', stored} end
    end
    return {'conflict', tostring(n)}
  end
  if n >= tonumber(ARGV[5]) then return {'limit', tostring(n)} end
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
  return {'ok', tostring(n + 1)}
end
local result = commit()
if #KEYS > 2 then
  settle({KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]},
         {ARGV[6], ARGV[7], ARGV[8], ARGV[9], result[1]})
end
return result
"""


@dataclass(frozen=True, slots=True)
class Settlement:
    """Keys and arguments of the quota settle function (see ``quota.counters``)."""

    keys: list[str]
    args: list[Any]  # rid, actual tokens, tenant, event json (the outcome is the commit's)


@dataclass(frozen=True, slots=True)
class LoadedSession:
    record: SessionRecord
    turns: list[TurnRecord]  # empty unless asked for
    turn_count: int


@dataclass(frozen=True, slots=True)
class CommitResult:
    outcome: str  # ok | replay | conflict | limit | missing
    turn_count: int = 0
    stored: TurnRecord | None = None


class SessionStore(Protocol):
    async def admit(self, tenant: str, session_id: str, ttl: int, limit: int) -> bool: ...
    async def put(self, record: SessionRecord) -> None: ...
    async def load(self, tenant: str, session_id: str, with_turns: bool = True
                   ) -> LoadedSession | None: ...
    async def commit(self, record: SessionRecord, turn: TurnRecord, expected: int | None,
                     max_turns: int, settlement: Settlement | None = None) -> CommitResult: ...
    async def list_ids(self, tenant: str, offset: int, count: int) -> list[str]: ...
    async def close(self, tenant: str, session_id: str) -> int | None: ...
    async def ping(self) -> bool: ...


async def guard(call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailable(f"session store unreachable: {exc}") from exc
    except RedisError as exc:
        raise StoreUnavailable(f"session store error: {exc}") from exc


class RedisSessionStore:
    def __init__(self, client: aioredis.Redis, prefix: str = "ws") -> None:
        self._r = client
        self._p = prefix
        self._admit = client.register_script(_ADMIT)
        self._commit = client.register_script(SETTLE_FN + _COMMIT_BODY)

    @property
    def client(self) -> aioredis.Redis:
        return self._r

    @classmethod
    def from_url(cls, url: str, prefix: str = "ws") -> RedisSessionStore:
        client = aioredis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2,
                                         health_check_interval=10)
        return cls(client, prefix)

    def _keys(self, tenant: str, sid: str) -> tuple[str, str]:
        base = f"{self._p}:{{t:{tenant}:s:{sid}}}"
        return f"{base}:meta", f"{base}:turns"

    def _index(self, tenant: str) -> str:
        return f"{self._p}:{{t:{tenant}}}:sessions"

    async def admit(self, tenant: str, session_id: str, ttl: int, limit: int) -> bool:
        now = time.time()
        keys = [self._index(tenant)]
        args: list[Any] = [now, now + ttl, session_id, limit]
        return bool(await guard(lambda: self._admit(keys=keys, args=args)))

    async def put(self, record: SessionRecord) -> None:
        meta, _ = self._keys(record.tenant, record.session_id)
        await guard(lambda: self._r.set(meta, record.to_json(), ex=record.ttl_seconds))

    async def load(self, tenant: str, session_id: str, with_turns: bool = True
                   ) -> LoadedSession | None:
        """Metadata with the turns (or only their count), in one round trip."""
        meta, turns = self._keys(tenant, session_id)

        async def run() -> list[Any]:
            pipe = self._r.pipeline(transaction=False)
            pipe.get(meta)
            if with_turns:
                pipe.lrange(turns, 0, -1)
            else:
                pipe.llen(turns)
            return list(await pipe.execute())

        raw_meta, raw_turns = await guard(run)
        if raw_meta is None:
            return None
        record = SessionRecord.from_json(raw_meta)
        if not with_turns:
            return LoadedSession(record, [], int(raw_turns))
        parsed = [TurnRecord.from_json(t) for t in raw_turns]
        return LoadedSession(record, parsed, len(parsed))

    async def commit(self, record: SessionRecord, turn: TurnRecord, expected: int | None,
                     max_turns: int, settlement: Settlement | None = None) -> CommitResult:
        meta, turns = self._keys(record.tenant, record.session_id)
        keys = [meta, turns]
        args: list[Any] = [-1 if expected is None else expected, turn.to_json(), turn.action,
                           record.ttl_seconds, max_turns]
        if settlement is not None:
            keys += settlement.keys
            args += settlement.args[:4]
        raw = await guard(lambda: self._commit(keys=keys, args=args))
        outcome = bytes(raw[0]).decode()
        if outcome == "replay":
            return CommitResult("replay", (expected or 0) + 1, TurnRecord.from_json(raw[1]))
        count = int(raw[1])
        if outcome == "ok":
            index, expiry = self._index(record.tenant), time.time() + record.ttl_seconds
            await guard(lambda: self._r.zadd(index, {record.session_id: expiry}, xx=True))
        return CommitResult(outcome, count)

    async def list_ids(self, tenant: str, offset: int, count: int) -> list[str]:
        raw = await guard(lambda: self._r.zrangebyscore(
            self._index(tenant), time.time(), "+inf", start=offset, num=count))
        return [r.decode() if isinstance(r, bytes) else str(r) for r in raw]

    async def close(self, tenant: str, session_id: str) -> int | None:
        meta, turns = self._keys(tenant, session_id)

        async def run() -> list[Any]:
            pipe = self._r.pipeline(transaction=False)
            pipe.llen(turns)
            pipe.delete(meta, turns)
            pipe.zrem(self._index(tenant), session_id)
            return list(await pipe.execute())

        count, deleted, _ = await guard(run)
        return int(count) if deleted else None

    async def ping(self) -> bool:
        return bool(await guard(lambda: self._r.ping()))

    async def aclose(self) -> None:
        await self._r.aclose()
