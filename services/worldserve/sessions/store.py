"""Sessions in Redis: metadata + an append-only turn list, idle TTL, tenant-scoped keys.

Keys come from ``worldserve.keyspace`` (the tenant is part of every key, so another tenant's id
simply does not resolve): a session's meta, its own turns and the forks taken from it (then its
turns outlive a close), and the tenant's session index (sid -> expiry, for limits and listing).

A fork reads its inherited turns from its ancestors' turn lists (``sessions.lineage``). The
commit script also touches the quota keys, the usage stream and a fork's ancestors, and the
reserve-if-current script the quota keys, so they need one Redis primary (see docs/TENANCY.md).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

import redis.asyncio as aioredis

from worldserve.errors import StoreUnavailable
from worldserve.keyspace import Keyspace
from worldserve.quota.counters import ReserveRunner, Settlement
from worldserve.quota.lua import RESERVE_FN, SETTLE_FN
from worldserve.redis_guard import guard
from worldserve.sessions.lineage import base_count
from worldserve.sessions.records import LoadedSession, SessionRecord, TurnRecord

_ADMIT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
return 1
"""

# Referenced turn lists (a fork's ancestors) must outlive the sessions that read them: every
# write that touches a session lifts their time-to-live to at least the session's.
_KEEP_ALIVE_FN = """
local function keep_alive(first, last, ttl)
  for i = first, last do
    local left = redis.call('TTL', KEYS[i])
    if left >= 0 and left < ttl then redis.call('EXPIRE', KEYS[i], ttl) end
  end
end
"""

# KEYS: meta, turns, tenant index, <na ancestor turn lists>[, 6 settle keys].
# ARGV: expected (-1 = any, counted over the whole history), turn json, action, ttl, max_turns,
#       base (inherited turns), na, index expiry score, session id[, 4 settle args].
# With the settle part (quota.counters) the step's reservation is settled and its usage event
# written in the same atomic call, whatever the outcome. One round trip per committed step.
_COMMIT_BODY = """
local base = tonumber(ARGV[6])
local na = tonumber(ARGV[7])
local ttl = tonumber(ARGV[4])
local function commit()
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing', '0'} end
  local n = redis.call('LLEN', KEYS[2]) + base
  local expected = tonumber(ARGV[1])
  if expected >= 0 and n ~= expected then
    if n > expected and expected >= base then
      local stored = redis.call('LINDEX', KEYS[2], expected - base)
      if cjson.decode(stored)['action'] == ARGV[3] then return {'replay', stored} end
    end
    return {'conflict', tostring(n)}
  end
  if n >= tonumber(ARGV[5]) then return {'limit', tostring(n)} end
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('ZADD', KEYS[3], 'XX', ARGV[8], ARGV[9])
  keep_alive(4, 3 + na, ttl)
  return {'ok', tostring(n + 1)}
end
local result = commit()
local s = 3 + na
if #KEYS > s then
  settle({KEYS[s + 1], KEYS[s + 2], KEYS[s + 3], KEYS[s + 4], KEYS[s + 5], KEYS[s + 6]},
         {ARGV[10], ARGV[11], ARGV[12], ARGV[13], result[1]})
end
return result
"""

# KEYS: meta, turns, <4 reserve keys>. ARGV: turn count, base (inherited turns), <10 reserve args>.
# A step rendered from the tail this gateway kept (``sessions.tails``) reserves its tokens only if
# the session is still there with that many turns: one round trip instead of a load and a reserve.
_RESERVE_IF_CURRENT_BODY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'stale', '0'} end
if redis.call('LLEN', KEYS[2]) + tonumber(ARGV[2]) ~= tonumber(ARGV[1]) then
  return {'stale', '0'}
end
return reserve({KEYS[3], KEYS[4], KEYS[5], KEYS[6]},
               {ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10],
                ARGV[11], ARGV[12]})
"""

# KEYS: parent meta, tenant index, child meta, parent's set of forks, <referenced turn lists>.
# ARGV: now, lease expiry, child id, session limit, child json, ttl.
_FORK = _KEEP_ALIVE_FN + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 'limit' end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[5], 'EX', ARGV[6])
redis.call('SADD', KEYS[4], ARGV[3])
if redis.call('TTL', KEYS[4]) < tonumber(ARGV[6]) then redis.call('EXPIRE', KEYS[4], ARGV[6]) end
keep_alive(5, #KEYS, tonumber(ARGV[6]))
return 'ok'
"""

# KEYS: meta, turns, forks counter, tenant index. ARGV: session id.
# A session that was forked keeps its turn list (descendants read it); it expires on its own,
# kept alive by their writes. Returns the whole turn count (inherited + own), -1 if unknown.
_CLOSE = """
local raw = redis.call('GET', KEYS[1])
if not raw then return -1 end
local n = redis.call('LLEN', KEYS[2])
local lineage = cjson.decode(raw)['lineage']
if type(lineage) == 'table' then
  for _, segment in ipairs(lineage) do n = n + tonumber(segment[2]) end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('EXISTS', KEYS[3]) == 0 then redis.call('DEL', KEYS[2]) end
return n
"""


@dataclass(frozen=True, slots=True)
class CommitResult:
    outcome: str  # ok | replay | conflict | limit | missing
    turn_count: int = 0
    stored: TurnRecord | None = None


class SessionStore(Protocol):
    async def admit(self, tenant: str, session_id: str, ttl: int, limit: int) -> bool: ...
    async def put(self, record: SessionRecord, turns: list[TurnRecord] | None = None
                  ) -> None: ...
    async def load(self, tenant: str, session_id: str, with_turns: bool = True,
                   tail: int | None = None) -> LoadedSession | None: ...
    async def commit(self, record: SessionRecord, turn: TurnRecord, expected: int | None,
                     max_turns: int, settlement: Settlement | None = None) -> CommitResult: ...
    def reserve_if_current(self, record: SessionRecord, turn_count: int) -> ReserveRunner: ...
    async def list_ids(self, tenant: str, offset: int, count: int) -> list[str]: ...
    async def fork(self, parent: SessionRecord, child: SessionRecord, limit: int) -> str: ...
    async def forks(self, tenant: str, session_id: str) -> list[str]: ...
    async def close(self, tenant: str, session_id: str) -> int | None: ...
    async def ping(self) -> bool: ...


class RedisSessionStore:
    def __init__(self, client: aioredis.Redis, prefix: str = "ws") -> None:
        self._r = client
        self._ks = Keyspace(prefix)
        self._admit = client.register_script(_ADMIT)
        self._commit = client.register_script(SETTLE_FN + _KEEP_ALIVE_FN + _COMMIT_BODY)
        self._fork = client.register_script(_FORK)
        self._close = client.register_script(_CLOSE)
        self._reserve_if_current = client.register_script(RESERVE_FN + _RESERVE_IF_CURRENT_BODY)

    @property
    def client(self) -> aioredis.Redis:
        return self._r

    @classmethod
    def from_url(cls, url: str, prefix: str = "ws") -> RedisSessionStore:
        client = aioredis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2,
                                         health_check_interval=10)
        return cls(client, prefix)

    def _keys(self, tenant: str, sid: str) -> tuple[str, str]:
        keys = self._ks.session(tenant, sid)
        return keys.meta, keys.turns

    def _index(self, tenant: str) -> str:
        return self._ks.tenant_sessions(tenant)

    async def admit(self, tenant: str, session_id: str, ttl: int, limit: int) -> bool:
        now = time.time()
        keys = [self._index(tenant)]
        args: list[Any] = [now, now + ttl, session_id, limit]
        return bool(await guard(lambda: self._admit(keys=keys, args=args)))

    async def put(self, record: SessionRecord, turns: list[TurnRecord] | None = None) -> None:
        """Store a session's metadata (and, for an imported one, its first turns)."""
        meta, turns_key = self._keys(record.tenant, record.session_id)

        async def run() -> None:
            pipe = self._r.pipeline(transaction=True)
            pipe.set(meta, record.to_json(), ex=record.ttl_seconds)
            if turns:
                pipe.rpush(turns_key, *[t.to_json() for t in turns])
                pipe.expire(turns_key, record.ttl_seconds)
            await pipe.execute()

        await guard(run)

    def _turns_key(self, tenant: str, sid: str) -> str:
        return self._keys(tenant, sid)[1]

    def _lineage_keys(self, record: SessionRecord) -> list[str]:
        return [self._turns_key(record.tenant, sid) for sid, _ in record.lineage]

    async def load(self, tenant: str, session_id: str, with_turns: bool = True,
                   tail: int | None = None) -> LoadedSession | None:
        """Metadata with the turns (or only their count, or only the latest ``tail`` of them):
        one round trip, two for a fork whose inherited turns are needed. A step reads a tail,
        so its cost does not grow with the session's length."""
        meta, turns = self._keys(tenant, session_id)
        want = None if tail is None else max(tail, 0)

        async def run() -> list[Any]:
            pipe = self._r.pipeline(transaction=True)  # count and turns from one moment
            pipe.get(meta)
            pipe.llen(turns)
            if with_turns and want != 0:
                pipe.lrange(turns, 0 if want is None else -want, -1)
            return list(await pipe.execute())

        raw_meta, own_count, *own = await guard(run)
        if raw_meta is None:
            return None
        record = SessionRecord.from_json(raw_meta)
        total = base_count(record.lineage) + int(own_count)
        if not with_turns:
            return LoadedSession(record, [], total)
        raw_turns = own[0] if own else []
        missing = total - len(raw_turns) if want is None else min(want, total) - len(raw_turns)
        inherited = await self._inherited(tenant, record, missing) if missing > 0 else []
        parsed = [TurnRecord.from_json(t) for t in [*inherited, *raw_turns]]
        return LoadedSession(record, parsed, total, total - len(parsed))

    async def _inherited(self, tenant: str, record: SessionRecord, last: int) -> list[Any]:
        """The last ``last`` turns a fork inherits, from its lineage's segments."""
        ranges: list[tuple[str, int, int]] = []  # (ancestor, start, count), newest first
        for sid, count in reversed(record.lineage):
            take = min(count, last)
            if take > 0:
                ranges.append((sid, count - take, take))
            last -= take

        async def run() -> list[Any]:
            pipe = self._r.pipeline(transaction=False)
            for sid, start, count in ranges:
                pipe.lrange(self._turns_key(tenant, sid), start, start + count - 1)
            return list(await pipe.execute())

        out: list[Any] = []
        for (sid, _start, count), part in zip(ranges, await guard(run), strict=True):
            if len(part) < count:
                raise StoreUnavailable(f"the history that session {record.session_id} shares "
                                       f"with {sid} is gone (expired)")
            out[:0] = part
        return out

    async def commit(self, record: SessionRecord, turn: TurnRecord, expected: int | None,
                     max_turns: int, settlement: Settlement | None = None) -> CommitResult:
        meta, turns = self._keys(record.tenant, record.session_id)
        ancestors = self._lineage_keys(record)
        keys = [meta, turns, self._index(record.tenant), *ancestors]
        args: list[Any] = [-1 if expected is None else expected, turn.to_json(), turn.action,
                           record.ttl_seconds, max_turns, base_count(record.lineage),
                           len(ancestors), time.time() + record.ttl_seconds, record.session_id]
        if settlement is not None:
            keys += settlement.keys
            args += settlement.args
        raw = await guard(lambda: self._commit(keys=keys, args=args))
        outcome = bytes(raw[0]).decode()
        if outcome == "replay":
            return CommitResult("replay", (expected or 0) + 1, TurnRecord.from_json(raw[1]))
        return CommitResult(outcome, int(raw[1]))

    def reserve_if_current(self, record: SessionRecord, turn_count: int) -> ReserveRunner:
        """A runner for ``RedisQuota.reserve`` that reserves only while the session exists with
        ``turn_count`` turns; otherwise nothing is reserved (ReservationSkipped 'stale')."""
        meta, turns = self._keys(record.tenant, record.session_id)
        head: list[Any] = [turn_count, base_count(record.lineage)]

        def run(keys: list[str], args: list[Any]) -> Awaitable[Any]:
            return self._reserve_if_current(  # type: ignore[no-any-return]
                keys=[meta, turns, *keys], args=[*head, *args])

        return run

    async def fork(self, parent: SessionRecord, child: SessionRecord, limit: int) -> str:
        """Store a child that shares the parent's turns: 'ok', 'missing' or 'limit'."""
        p_meta, _ = self._keys(parent.tenant, parent.session_id)
        c_meta, _ = self._keys(child.tenant, child.session_id)
        forks = self._ks.session(parent.tenant, parent.session_id).forks
        referenced = [self._turns_key(child.tenant, sid) for sid, _ in child.lineage]
        now = time.time()
        keys = [p_meta, self._index(child.tenant), c_meta, forks, *referenced]
        args: list[Any] = [now, now + child.ttl_seconds, child.session_id, limit,
                           child.to_json(), child.ttl_seconds]
        raw = await guard(lambda: self._fork(keys=keys, args=args))
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    async def forks(self, tenant: str, session_id: str) -> list[str]:
        """Ids of the forks taken from a session (some may since be closed or expired)."""
        forks = self._ks.session(tenant, session_id).forks
        raw = await guard(lambda: self._r.smembers(forks))
        return sorted(r.decode() if isinstance(r, bytes) else str(r) for r in raw)

    async def list_ids(self, tenant: str, offset: int, count: int) -> list[str]:
        raw = await guard(lambda: self._r.zrangebyscore(
            self._index(tenant), time.time(), "+inf", start=offset, num=count))
        return [r.decode() if isinstance(r, bytes) else str(r) for r in raw]

    async def close(self, tenant: str, session_id: str) -> int | None:
        """Delete a session; its turn count, or None if unknown. Forks keep working."""
        own = self._ks.session(tenant, session_id)
        keys = [own.meta, own.turns, own.forks, self._index(tenant)]
        count = int(await guard(lambda: self._close(keys=keys, args=[session_id])))
        return None if count < 0 else count  # one round trip

    async def ping(self) -> bool:
        return bool(await guard(lambda: self._r.ping()))

    async def aclose(self) -> None:
        await self._r.aclose()
