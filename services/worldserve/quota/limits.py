"""What a tenant may do, and the arithmetic of token reservations (pure: no I/O).

A tenant's limits come from PostgreSQL (``quotas`` table) merged over the deployment's defaults.
``None`` means "no limit" for the numeric quotas and "all" for the allowed lists.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from dataclasses import dataclass

from worldserve.errors import PermissionDenied, ResourceExhausted


@dataclass(frozen=True, slots=True)
class TenantLimits:
    max_sessions: int | None = None
    max_inflight_steps: int | None = None
    tokens_per_minute: int | None = None
    monthly_token_budget: int | None = None
    allowed_models: tuple[str, ...] | None = None  # None = every model the deployment serves
    allowed_domains: tuple[str, ...] | None = None  # None = every domain the deployment enables


def check_allowed(limits: TenantLimits, tenant: str, model_version: str, requested_model: str,
                  domain: str) -> None:
    """PERMISSION_DENIED unless the tenant may use this model version and domain.

    A model entry matches the full ``name@version``, the bare name (any version), or the alias
    the client asked for (``stable``).
    """
    if limits.allowed_domains is not None and domain not in limits.allowed_domains:
        raise PermissionDenied(f"tenant {tenant} may not use domain {domain}")
    if limits.allowed_models is not None:
        name = model_version.split("@", 1)[0]
        names = {model_version, name} | ({requested_model} if requested_model else set())
        if not names & set(limits.allowed_models):
            raise PermissionDenied(f"tenant {tenant} may not use model {model_version}")


def reservation_tokens(prompt_bytes: int, max_tokens: int, bytes_per_token: float) -> int:
    """Tokens to reserve before a step: an input estimate plus the most the model may write.

    With ``bytes_per_token`` = 1 the input part is an upper bound for byte-level BPE tokenizers
    (every token covers at least one byte), so the reservation never undershoots one call.
    """
    return math.ceil(prompt_bytes / max(bytes_per_token, 1e-9)) + max_tokens


def oversized(limits: TenantLimits, tenant: str, tokens: int) -> ResourceExhausted | None:
    """The refusal of a step that needs more tokens than a whole quota holds, else None."""
    for name, value in (("tokens_per_minute", limits.tokens_per_minute),
                        ("monthly_token_budget", limits.monthly_token_budget)):
        if value is not None and tokens > value:
            return ResourceExhausted(
                f"one step may need {tokens} tokens (prompt estimate + max_tokens), more than "
                f"the tenant's {name} of {value}; lower sampling.max_tokens",
                subject=f"tenant:{tenant}:{name}")
    return None


def month_of(ts: float) -> str:
    """Budget period of an epoch time: ``YYYYMM`` in UTC."""
    return _month_of_hour(int(ts // 3600))


@functools.lru_cache(maxsize=8)
def _month_of_hour(hour: int) -> str:  # months begin on whole UTC hours; a step asks 3 times
    return dt.datetime.fromtimestamp(hour * 3600, dt.UTC).strftime("%Y%m")


def month_bounds(month: str) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of a ``YYYYMM`` period, as aware UTC datetimes."""
    start = dt.datetime(int(month[:4]), int(month[4:]), 1, tzinfo=dt.UTC)
    end = (start + dt.timedelta(days=32)).replace(day=1)
    return start, end


def seconds_to_next_month(ts: float) -> float:
    _, end = month_bounds(month_of(ts))
    return max(end.timestamp() - ts, 1.0)
