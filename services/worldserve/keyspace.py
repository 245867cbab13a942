"""Every Redis key and channel of worldserve, spelled in one place (pure; docs/ARCHITECTURE.md).

Hash tags keep what one Lua script touches in one cluster slot: a session's keys share
``{t:<tenant>:s:<sid>}``, a tenant's quota keys ``{q:<tenant>}``.

    {prefix}:{t:<tenant>:s:<sid>}:meta    JSON SessionRecord (EX idle TTL)
    {prefix}:{t:<tenant>:s:<sid>}:turns   list of JSON TurnRecord: the session's own turns
    {prefix}:{t:<tenant>:s:<sid>}:forks   set of forks taken from it
    {prefix}:{t:<tenant>}:sessions        zset sid -> expiry: limits and listing
    {prefix}:{q:<tenant>}:inflight        zset reservation id -> lease expiry
    {prefix}:{q:<tenant>}:reserved        hash reservation id -> tokens, plus "__total"
    {prefix}:{q:<tenant>}:used:<YYYYMM>   tokens settled that month
    {prefix}:{q:<tenant>}:tpm:<minute>    tokens charged in that minute
    {prefix}:usage                        stream of usage events (the accounting worker's input)
    {prefix}:usage:served                 hash tenant -> events appended (reconciliation)
    {prefix}:usage:dead                   stream of events the worker could not store
    {prefix}:registry:models              hash "name@version" -> registry entry JSON
    {prefix}:registry:aliases             hash "name:stable|canary" -> "name@version"
    {prefix}:registry:changed             pub/sub channel: a model's name on every change
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SessionKeys:
    meta: str
    turns: str
    forks: str


@dataclass(frozen=True, slots=True)
class QuotaKeys:
    inflight: str
    reserved: str
    base: str

    def used(self, month: str) -> str:
        return f"{self.base}:used:{month}"

    def tpm(self, minute: int | str) -> str:
        return f"{self.base}:tpm:{minute}"


@dataclass(frozen=True, slots=True)
class Keyspace:
    prefix: str = "ws"

    def session(self, tenant: str, session_id: str) -> SessionKeys:
        base = f"{self.prefix}:{{t:{tenant}:s:{session_id}}}"
        return SessionKeys(f"{base}:meta", f"{base}:turns", f"{base}:forks")

    def tenant_sessions(self, tenant: str) -> str:
        return f"{self.prefix}:{{t:{tenant}}}:sessions"

    def quota(self, tenant: str) -> QuotaKeys:
        base = f"{self.prefix}:{{q:{tenant}}}"
        return QuotaKeys(f"{base}:inflight", f"{base}:reserved", base)

    @property
    def usage_stream(self) -> str:
        return f"{self.prefix}:usage"

    @property
    def usage_served(self) -> str:
        return f"{self.prefix}:usage:served"

    @property
    def usage_dead(self) -> str:
        return f"{self.prefix}:usage:dead"

    @property
    def registry_models(self) -> str:
        return f"{self.prefix}:registry:models"

    @property
    def registry_aliases(self) -> str:
        return f"{self.prefix}:registry:aliases"

    @property
    def registry_changed(self) -> str:
        return f"{self.prefix}:registry:changed"
