"""Admin inputs checked before they reach PostgreSQL (pure): ids, names, model lists, periods.

Every string an Admin request carries is bounded and free of NUL characters (PostgreSQL text
cannot hold one); a bad value answers ``INVALID_ARGUMENT`` naming the field, never INTERNAL.
"""

from __future__ import annotations

import datetime as dt

from worldserve.errors import InvalidArgument, echo
from worldserve.tenancy.records import QuotaSpec

TENANT_ID_MAX = 64
TEXT_MAX_BYTES = 256  # display names, key names, model labels, key ids
LIST_MAX = 64  # allowed models / domains
KEY_ID_MAX = 32
INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
QUOTA_MAX = {"max_sessions": INT32_MAX, "max_inflight_steps": INT32_MAX,
             "tokens_per_minute": INT64_MAX, "monthly_token_budget": INT64_MAX}
# Timestamps PostgreSQL and Python's datetime can both hold.
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)


def tenant_id(value: str, field: str = "tenant_id") -> str:
    if (not value or len(value) > TENANT_ID_MAX
            or not all(c.isascii() and (c.isalnum() or c in "-_.") for c in value)):
        raise InvalidArgument(f"{field} {echo(value)}: 1-{TENANT_ID_MAX} characters of letters, "
                              "digits, '-', '_', '.'")
    return value


def lookup(field: str, value: str, max_chars: int) -> str:
    """An id used to look something up: NUL-free and no longer than any stored one."""
    if "\x00" in value:
        raise InvalidArgument(f"{field} must not contain a NUL character")
    if len(value) > max_chars:
        raise InvalidArgument(f"{field} {echo(value)} exceeds {max_chars} characters")
    return value


def text(field: str, value: str, max_bytes: int = TEXT_MAX_BYTES) -> str:
    if "\x00" in value:
        raise InvalidArgument(f"{field} must not contain a NUL character")
    if len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise InvalidArgument(f"{field} exceeds {max_bytes} bytes")
    return value


def texts(field: str, values: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    if len(values) > LIST_MAX:
        raise InvalidArgument(f"{field} holds at most {LIST_MAX} entries")
    return tuple(text(field, v) for v in values)


def quota(spec: QuotaSpec) -> QuotaSpec:
    """``spec`` when every number fits its column and is not negative, every list bounded."""
    for f, top in QUOTA_MAX.items():
        value = getattr(spec, f)
        if value is not None and not 0 <= value <= top:
            raise InvalidArgument(f"{f} must be within [0, {top}]")
    texts("allowed_models", spec.allowed_models)
    texts("allowed_domains", spec.allowed_domains)
    return spec


def period(start: dt.datetime, end: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    for name, value in (("start", start), ("end", end)):
        if not EARLIEST <= value <= LATEST:
            raise InvalidArgument(f"{name} must be between {EARLIEST:%Y-%m-%d} and "
                                  f"{LATEST:%Y-%m-%d}")
    if end <= start:
        raise InvalidArgument("the end of the period must be after its start")
    return start, end
