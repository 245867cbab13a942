"""protobuf <-> tenancy records for the Admin API (pure)."""

from __future__ import annotations

import datetime as dt

from google.protobuf.timestamp_pb2 import Timestamp

from worldserve.errors import InvalidArgument
from worldserve.tenancy.records import KeyInfo, QuotaSpec, TenantInfo, UsageRow
from worldserve.v1 import admin_pb2 as pb


def timestamp(value: dt.datetime | None) -> Timestamp | None:
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(dt.UTC).replace(tzinfo=None))
    return ts


def instant(field: str, ts: Timestamp) -> dt.datetime:
    """A request's timestamp as an aware datetime; INVALID_ARGUMENT when out of range."""
    try:
        return ts.ToDatetime(dt.UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise InvalidArgument(f"{field} is not a valid timestamp") from exc


def quota_spec(q: pb.Quota) -> QuotaSpec:
    def opt(field: str) -> int | None:
        return int(getattr(q, field)) if q.HasField(field) else None  # type: ignore[arg-type]

    return QuotaSpec(
        max_sessions=opt("max_sessions"), max_inflight_steps=opt("max_inflight_steps"),
        tokens_per_minute=opt("tokens_per_minute"),
        monthly_token_budget=opt("monthly_token_budget"),
        allowed_models=tuple(q.allowed_models) if q.restrict_models or q.allowed_models else None,
        allowed_domains=(tuple(q.allowed_domains) if q.restrict_domains or q.allowed_domains
                         else None),
    )


def quota_pb(spec: QuotaSpec) -> pb.Quota:
    q = pb.Quota()
    for field in ("max_sessions", "max_inflight_steps", "tokens_per_minute",
                  "monthly_token_budget"):
        value = getattr(spec, field)
        if value is not None:
            setattr(q, field, value)
    if spec.allowed_models is not None:
        q.restrict_models = True
        q.allowed_models.extend(spec.allowed_models)
    if spec.allowed_domains is not None:
        q.restrict_domains = True
        q.allowed_domains.extend(spec.allowed_domains)
    return q


def tenant_pb(t: TenantInfo) -> pb.Tenant:
    return pb.Tenant(tenant_id=t.tenant_id, display_name=t.display_name,
                     default_model=t.default_model, created_at=timestamp(t.created_at),
                     disabled=t.disabled, quota=quota_pb(t.quota), month_tokens=t.month_tokens)


def key_pb(k: KeyInfo) -> pb.ApiKey:
    return pb.ApiKey(key_id=k.key_id, tenant_id=k.tenant_id, prefix=k.prefix, role=k.role,
                     name=k.name, created_at=timestamp(k.created_at),
                     last_used_at=timestamp(k.last_used_at), revoked_at=timestamp(k.revoked_at))


def usage_pb(r: UsageRow) -> pb.UsageRow:
    return pb.UsageRow(group=r.group, steps=r.steps, input_tokens=r.input_tokens,
                       output_tokens=r.output_tokens, reasoning_tokens=r.reasoning_tokens,
                       faults=r.faults, errors=r.errors)
