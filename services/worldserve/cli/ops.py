"""`worldserve db …`, `worldserve worker`, `worldserve reconcile`: commands that talk to the
databases directly (run them where PostgreSQL and Redis are reachable, e.g. in a pod)."""

from __future__ import annotations

import asyncio
import time

import typer
from rich.console import Console

from worldserve.cli.output import render
from worldserve.settings import Settings

console = Console()
db_app = typer.Typer(help="Database schema and bootstrap.", no_args_is_help=True)


def _database_url() -> str:
    from worldserve.dev.services import resolve_database_url

    try:
        return resolve_database_url(Settings())
    except RuntimeError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc


@db_app.command("upgrade")
def db_upgrade(bootstrap: bool = typer.Option(
        False, help="Also register WORLDSERVE_ADMIN_API_KEY (and the dev key, if set) for "
        "the WORLDSERVE_DEV_TENANT tenant (what the Helm chart's init container does).")) -> None:
    """Apply the migrations (idempotent) and create the coming months' usage partitions."""
    from worldserve.db import migrate

    if bootstrap:
        from worldserve.db.bootstrap import bootstrap as run_bootstrap

        revision = run_bootstrap(_database_url(), Settings())
    else:
        revision = migrate.upgrade(_database_url())
    console.print(f"database at revision [bold]{revision}[/]")


@db_app.command("create-admin-key")
def db_create_admin_key(tenant: str = typer.Option("ops", help="Tenant of the operators."),
                        name: str = typer.Option("bootstrap", help="Label of the key.")) -> None:
    """Create an admin-role key directly in the database (the first key of a deployment)."""
    from worldserve.db.repository import Repository, create_engine

    async def run() -> str:
        repo = Repository(create_engine(_database_url()))
        try:
            await repo.ensure_tenant(tenant, "operators")
            _, secret = await repo.create_key(tenant, "admin", name)
            return secret
        finally:
            await repo.aclose()

    console.print(f"admin key (shown once): [bold]{asyncio.run(run())}[/]")


def worker() -> None:
    """Run the accounting worker: usage stream → PostgreSQL, until SIGTERM."""
    from worldserve.accounting.worker import main

    main()


def operator() -> None:
    """Run the Kubernetes operator (WorldModel and Tenant resources), until SIGTERM."""
    from worldserve_operator.main import main

    main()


def reconcile(tenant: list[str] = typer.Option([], help="Only these tenants."),
              wait: float = typer.Option(0.0, help="Wait up to this many seconds for the "
                                         "stream backlog to drain first."),
              fmt: str = typer.Option("table", "--format", help="table, csv or json.")) -> None:
    """Usage events served vs rows stored, per tenant; exit 1 unless they balance."""
    import redis

    from worldserve.accounting.reconcile import reconcile as run_reconcile
    from worldserve.dev.services import resolve_redis_url

    settings = Settings()
    client = redis.Redis.from_url(resolve_redis_url(settings))
    deadline = time.monotonic() + wait
    while True:
        report = run_reconcile(client, _database_url(), settings.key_prefix, tenant or None)
        if report.balanced or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    render(console, f"usage reconciliation (stream backlog: {report.backlog})",
           ["tenant", "served", "stored", "missing"],
           [[r.tenant, r.served, r.stored, r.missing] for r in report.rows], fmt)
    if not report.balanced:
        if fmt == "table":
            console.print(f"[red]not balanced[/]: backlog {report.backlog}")
        raise typer.Exit(1)
