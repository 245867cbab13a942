"""Tenants, quotas, keys and usage rows as plain data (what the Admin API and CLI show)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TypeVar

from worldserve.quota.limits import TenantLimits

GROUPINGS = ("model", "domain", "day")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    """A tenant's stored quota; None = the deployment default (numbers) or all (lists)."""

    max_sessions: int | None = None
    max_inflight_steps: int | None = None
    tokens_per_minute: int | None = None
    monthly_token_budget: int | None = None
    allowed_models: tuple[str, ...] | None = None
    allowed_domains: tuple[str, ...] | None = None

    def over(self, defaults: TenantLimits) -> TenantLimits:
        """The effective limits: this spec where set, the deployment's defaults elsewhere."""
        return TenantLimits(
            max_sessions=_pick(self.max_sessions, defaults.max_sessions),
            max_inflight_steps=_pick(self.max_inflight_steps, defaults.max_inflight_steps),
            tokens_per_minute=_pick(self.tokens_per_minute, defaults.tokens_per_minute),
            monthly_token_budget=_pick(self.monthly_token_budget, defaults.monthly_token_budget),
            allowed_models=_pick(self.allowed_models, defaults.allowed_models),
            allowed_domains=_pick(self.allowed_domains, defaults.allowed_domains),
        )


def _pick(value: _T | None, default: _T | None) -> _T | None:
    return default if value is None else value


@dataclass(frozen=True, slots=True)
class TenantInfo:
    tenant_id: str
    display_name: str
    default_model: str
    created_at: dt.datetime
    disabled: bool
    quota: QuotaSpec = field(default_factory=QuotaSpec)
    month_tokens: int = 0  # tokens settled this month according to the rollups


@dataclass(frozen=True, slots=True)
class KeyInfo:
    key_id: str
    tenant_id: str
    prefix: str
    role: str
    name: str
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    revoked_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class UsageRow:
    group: str
    steps: int
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    faults: int
    errors: int

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens
