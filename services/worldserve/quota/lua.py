"""The quota Lua scripts as text (shared by ``quota.counters`` and the session commit)."""

# A Lua function shared by the reserve script and the session store's "reserve if the session
# is as this gateway last saw it" script (``sessions.store``).
# Its parameters (named KEYS and ARGV, shadowing the script's own):
# KEYS: inflight, reserved, used(month), tpm(minute)
# ARGV: now, rid, expiry, tokens, max_inflight, tpm_limit, budget, tpm_retry_s, month_retry_s,
#       allow_unseeded (1 = a missing month counter is not an error)   (-1 = no limit)
RESERVE_FN = """
local function reserve(KEYS, ARGV)
local now = tonumber(ARGV[1])
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, rid in ipairs(dead) do
  local t = tonumber(redis.call('HGET', KEYS[2], rid) or '0')
  redis.call('HDEL', KEYS[2], rid)
  redis.call('HINCRBY', KEYS[2], '__total', -t)
  redis.call('ZREM', KEYS[1], rid)
end
local used = redis.call('GET', KEYS[3])
if not used then
  if ARGV[10] ~= '1' then return {'unseeded', '0'} end
  used = '0'  -- no budget and the database is away: the counter is seeded later
end
local tokens = tonumber(ARGV[4])
local max_inflight = tonumber(ARGV[5])
if max_inflight >= 0 and redis.call('ZCARD', KEYS[1]) >= max_inflight then
  return {'inflight', '1'}
end
local tpm = tonumber(ARGV[6])
if tpm >= 0 and tonumber(redis.call('GET', KEYS[4]) or '0') + tokens > tpm then
  return {'tpm', ARGV[8]}
end
local budget = tonumber(ARGV[7])
if budget >= 0 then
  local reserved = tonumber(redis.call('HGET', KEYS[2], '__total') or '0')
  if tonumber(used) + reserved + tokens > budget then return {'budget', ARGV[9]} end
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], tokens)
redis.call('HINCRBY', KEYS[2], '__total', tokens)
redis.call('INCRBY', KEYS[4], tokens)
redis.call('EXPIRE', KEYS[4], 120)
return {'ok', '0'}
end
"""

RESERVE_LUA = RESERVE_FN + """
return reserve(KEYS, ARGV)
"""

# A Lua function shared by the settle script and the session commit script.
# k: inflight, reserved, used(month now), tpm(minute of the reservation), stream, served
# a: rid, actual tokens, tenant, event json, outcome
SETTLE_FN = """
local function settle(k, a)
  local t = redis.call('HGET', k[2], a[1])
  local actual = tonumber(a[2])
  if t then
    redis.call('HDEL', k[2], a[1])
    redis.call('HINCRBY', k[2], '__total', -tonumber(t))
    redis.call('ZREM', k[1], a[1])
    if redis.call('EXISTS', k[4]) == 1 then redis.call('INCRBY', k[4], actual - tonumber(t)) end
  end
  if redis.call('EXISTS', k[3]) == 1 then redis.call('INCRBY', k[3], actual) end
  redis.call('XADD', k[5], '*', 'e', a[4], 'o', a[5])
  redis.call('HINCRBY', k[6], a[3], 1)
end
"""

SETTLE_LUA = SETTLE_FN + """
settle(KEYS, ARGV)
return 1
"""
