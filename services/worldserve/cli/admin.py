"""`worldserve admin …` and `worldserve usage`: the Admin API from the command line.

These talk gRPC to a gateway with an admin-role key (``--api-key``, else WORLDSERVE_API_KEY,
else WORLDSERVE_ADMIN_API_KEY), so they work against any deployment, not only a local one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import typer
from google.protobuf.timestamp_pb2 import Timestamp
from rich.console import Console

from worldserve.cli.output import FORMATS, render
from worldserve.settings import Settings
from worldserve.v1 import admin_pb2 as apb
from worldserve.v1 import admin_pb2_grpc as apb_grpc

console = Console()
admin_app = typer.Typer(help="Tenants, quotas and API keys (needs an admin-role key).",
                        no_args_is_help=True)
tenant_app = typer.Typer(help="Create, list and show tenants.", no_args_is_help=True)
quota_app = typer.Typer(help="Set a tenant's quotas.", no_args_is_help=True)
key_app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)
admin_app.add_typer(tenant_app, name="tenant")
admin_app.add_typer(quota_app, name="quota")
admin_app.add_typer(key_app, name="key")

TARGET = typer.Option("", "--target", help="Gateway address; default from settings.")
API_KEY = typer.Option("", "--api-key", help="Admin-role key; default WORLDSERVE_API_KEY.")
FORMAT = typer.Option("table", "--format", help="table, csv or json.")


@contextmanager
def admin_stub(target: str, api_key: str) -> Iterator[tuple[apb_grpc.AdminStub, list[tuple[str, str]]]]:
    settings = Settings()
    address = target or f"{settings.gateway_host}:{settings.gateway_port}"
    key = api_key or settings.api_key or settings.admin_api_key or ""
    if not key:
        console.print("[red]no API key[/]: pass --api-key or set WORLDSERVE_API_KEY")
        raise typer.Exit(2)
    channel = grpc.insecure_channel(address)
    try:
        yield apb_grpc.AdminStub(channel), [("authorization", f"Bearer {key}")]
    except grpc.RpcError as exc:
        code = exc.code().name if hasattr(exc, "code") else "ERROR"  # type: ignore[attr-defined]
        details = exc.details() if hasattr(exc, "details") else str(exc)  # type: ignore[attr-defined]
        console.print(f"[red]{code}[/]: {details}")
        raise typer.Exit(1) from exc
    finally:
        channel.close()


def _when(ts: Timestamp, present: bool = True) -> str:
    return ts.ToDatetime(dt.UTC).strftime("%Y-%m-%d %H:%M:%S") if present else ""


def _limit(q: apb.Quota, field: str) -> str:
    return str(getattr(q, field)) if q.HasField(field) else "default"  # type: ignore[arg-type]


def _tenant_rows(tenants: list[apb.Tenant]) -> list[list[object]]:
    return [[t.tenant_id, t.display_name, _limit(t.quota, "max_sessions"),
             _limit(t.quota, "max_inflight_steps"), _limit(t.quota, "tokens_per_minute"),
             _limit(t.quota, "monthly_token_budget"),
             ",".join(t.quota.allowed_models) if t.quota.restrict_models else "all",
             ",".join(t.quota.allowed_domains) if t.quota.restrict_domains else "all",
             t.month_tokens, "yes" if t.disabled else "", _when(t.created_at)] for t in tenants]


TENANT_COLUMNS = ["tenant", "name", "sessions", "in_flight", "tokens/min", "monthly_budget",
                  "models", "domains", "month_tokens", "disabled", "created"]


@tenant_app.command("create")
def tenant_create(tenant_id: str, name: str = typer.Option("", help="Display name."),
                  default_model: str = typer.Option("", help="Model when a session names none."),
                  target: str = TARGET, api_key: str = API_KEY, fmt: str = FORMAT) -> None:
    """Create a tenant (then give it a key with `admin key create`)."""
    with admin_stub(target, api_key) as (stub, md):
        t = stub.CreateTenant(apb.CreateTenantRequest(tenant_id=tenant_id, display_name=name,
                                                      default_model=default_model), metadata=md)
    render(console, "tenant created", TENANT_COLUMNS, _tenant_rows([t]), fmt)


@tenant_app.command("list")
def tenant_list(target: str = TARGET, api_key: str = API_KEY, fmt: str = FORMAT) -> None:
    """Every tenant with its quotas."""
    with admin_stub(target, api_key) as (stub, md):
        reply = stub.ListTenants(apb.ListTenantsRequest(), metadata=md)
    render(console, "tenants", TENANT_COLUMNS, _tenant_rows(list(reply.tenants)), fmt)


@admin_app.command("models")
def models(target: str = TARGET, api_key: str = API_KEY, fmt: str = FORMAT) -> None:
    """Served model versions, their aliases and the domains each simulates."""
    with admin_stub(target, api_key) as (stub, md):
        reply = stub.ListModels(apb.ListModelsRequest(), metadata=md)
    render(console, "models", ["version", "aliases", "domains"],
           [[m.version, ",".join(m.aliases), ",".join(m.domains)] for m in reply.models], fmt)


@tenant_app.command("show")
def tenant_show(tenant_id: str, target: str = TARGET, api_key: str = API_KEY,
                fmt: str = FORMAT) -> None:
    """One tenant, with the tokens it used this month."""
    with admin_stub(target, api_key) as (stub, md):
        t = stub.GetTenant(apb.GetTenantRequest(tenant_id=tenant_id), metadata=md)
    render(console, f"tenant {tenant_id}", TENANT_COLUMNS, _tenant_rows([t]), fmt)


def _list_option(value: str | None, current: list[str], restricted: bool
                 ) -> tuple[list[str], bool]:
    if value is None:
        return current, restricted
    if value.strip().lower() == "all":
        return [], False
    return [v.strip() for v in value.split(",") if v.strip()], True


@quota_app.command("set")
def quota_set(
    tenant_id: str,
    max_sessions: int | None = typer.Option(None, help="Concurrent sessions."),
    max_inflight: int | None = typer.Option(None, help="Steps running at once."),
    tokens_per_minute: int | None = typer.Option(None, help="Tokens per minute."),
    monthly_budget: int | None = typer.Option(None, help="Tokens per calendar month (UTC)."),
    models: str | None = typer.Option(None, help="Comma-separated models, or 'all'."),
    domains: str | None = typer.Option(None, help="Comma-separated domains, or 'all'."),
    reset: bool = typer.Option(False, help="Start from the defaults instead of the current quota."),
    target: str = TARGET, api_key: str = API_KEY, fmt: str = FORMAT,
) -> None:
    """Change the given quotas; the others keep their current values."""
    with admin_stub(target, api_key) as (stub, md):
        current = apb.Quota() if reset else stub.GetTenant(
            apb.GetTenantRequest(tenant_id=tenant_id), metadata=md).quota
        q = apb.Quota()
        q.CopyFrom(current)
        for field, value in (("max_sessions", max_sessions), ("max_inflight_steps", max_inflight),
                             ("tokens_per_minute", tokens_per_minute),
                             ("monthly_token_budget", monthly_budget)):
            if value is not None:
                setattr(q, field, value)
        allowed, q.restrict_models = _list_option(models, list(current.allowed_models),
                                                  current.restrict_models)
        del q.allowed_models[:]
        q.allowed_models.extend(allowed)
        allowed, q.restrict_domains = _list_option(domains, list(current.allowed_domains),
                                                   current.restrict_domains)
        del q.allowed_domains[:]
        q.allowed_domains.extend(d.upper() for d in allowed)
        stub.SetQuota(apb.SetQuotaRequest(tenant_id=tenant_id, quota=q), metadata=md)
        t = stub.GetTenant(apb.GetTenantRequest(tenant_id=tenant_id), metadata=md)
    render(console, f"quota of {tenant_id}", TENANT_COLUMNS, _tenant_rows([t]), fmt)


KEY_COLUMNS = ["key_id", "tenant", "prefix", "role", "name", "created", "last_used", "revoked"]


def _key_rows(keys: list[apb.ApiKey]) -> list[list[object]]:
    return [[k.key_id, k.tenant_id, k.prefix, k.role, k.name, _when(k.created_at),
             _when(k.last_used_at, k.HasField("last_used_at")),
             _when(k.revoked_at, k.HasField("revoked_at"))] for k in keys]


@key_app.command("create")
def key_create(tenant: str = typer.Option(..., help="Tenant the key acts for."),
               role: str = typer.Option("tenant", help="tenant or admin."),
               name: str = typer.Option("", help="A label to recognise the key by."),
               target: str = TARGET, api_key: str = API_KEY, fmt: str = FORMAT) -> None:
    """Create a key. Its secret is printed once; the server keeps only a hash."""
    with admin_stub(target, api_key) as (stub, md):
        made = stub.CreateApiKey(apb.CreateApiKeyRequest(tenant_id=tenant, role=role, name=name),
                                 metadata=md)
    if fmt == "table":
        render(console, "API key created", KEY_COLUMNS, _key_rows([made.key]))
        console.print(f"secret (shown once): [bold]{made.secret}[/]")
    else:
        render(console, "", [*KEY_COLUMNS, "secret"], [[*_key_rows([made.key])[0], made.secret]],
               fmt)


@key_app.command("list")
def key_list(tenant: str = typer.Option("", help="Only this tenant's keys."),
             target: str = TARGET, api_key: str = API_KEY, fmt: str = FORMAT) -> None:
    """Keys (never their secrets)."""
    with admin_stub(target, api_key) as (stub, md):
        reply = stub.ListApiKeys(apb.ListApiKeysRequest(tenant_id=tenant), metadata=md)
    render(console, "API keys", KEY_COLUMNS, _key_rows(list(reply.keys)), fmt)


@key_app.command("revoke")
def key_revoke(key_id: str, target: str = TARGET, api_key: str = API_KEY,
               fmt: str = FORMAT) -> None:
    """Revoke a key; gateways refuse it within a few seconds (their key cache)."""
    with admin_stub(target, api_key) as (stub, md):
        k = stub.RevokeApiKey(apb.RevokeApiKeyRequest(key_id=key_id), metadata=md)
    render(console, "API key revoked", KEY_COLUMNS, _key_rows([k]), fmt)


def _timestamp(text: str, default: dt.datetime) -> Timestamp:
    try:
        value = dt.datetime.fromisoformat(text) if text else default
    except ValueError:
        console.print(f"[red]not a date[/]: {text!r} (use YYYY-MM-DD or an ISO time)")
        raise typer.Exit(2) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(dt.UTC).replace(tzinfo=None))
    return ts


def usage(tenant: str = typer.Option(..., help="Tenant to report on."),
          start: str = typer.Option("", "--from", help="Start (UTC), default: this month's 1st."),
          end: str = typer.Option("", "--to", help="End, exclusive (UTC); default: now."),
          by: str = typer.Option("model", "--by", help="model, domain or day."),
          target: str = TARGET, api_key: str = API_KEY, fmt: str = FORMAT) -> None:
    """Usage of a tenant from the hourly rollups, grouped by model, domain or day."""
    if fmt not in FORMATS:
        console.print(f"[red]--format must be one of {', '.join(FORMATS)}[/]")
        raise typer.Exit(2)
    now = dt.datetime.now(dt.UTC)
    request = apb.GetUsageRequest(
        tenant_id=tenant, group_by=by,
        start=_timestamp(start, now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)),
        end=_timestamp(end, now))
    with admin_stub(target, api_key) as (stub, md):
        reply = stub.GetUsage(request, metadata=md)
    rows = [[r.group, r.steps, r.input_tokens, r.output_tokens, r.reasoning_tokens,
             r.input_tokens + r.output_tokens, r.faults, r.errors] for r in reply.rows]
    render(console, f"usage of {tenant} by {by}",
           [by, "steps", "input_tokens", "output_tokens", "reasoning_tokens", "total_tokens",
            "faults", "errors"], rows, fmt)
