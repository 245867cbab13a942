"""The `worldserve` command line."""

from __future__ import annotations

import secrets
import signal
import threading
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from worldserve.cli import evaluate, frontends, ops, sessions
from worldserve.cli.admin import admin_app
from worldserve.cli.admin import usage as admin_usage
from worldserve.cli.ops import db_app
from worldserve.settings import Settings

app = typer.Typer(help="worldserve: simulator-as-a-service for language world models.",
                  no_args_is_help=True, add_completion=False)
console = Console()
app.add_typer(admin_app, name="admin")
app.add_typer(db_app, name="db")
app.command("usage")(admin_usage)
app.command("worker")(ops.worker)
app.command("operator")(ops.operator)
app.command("reconcile")(ops.reconcile)
app.command("export")(sessions.export)
app.command("import")(sessions.import_)
app.command("replay")(sessions.replay)
app.command("eval")(evaluate.evaluate)
app.command("promote")(evaluate.promote)
app.command("mcp")(frontends.mcp)
app.command("openenv")(frontends.openenv)

STATE_DIR = Path(".worldserve")


def _settings_with_key() -> tuple[Settings, bool]:
    """Settings with a dev key and an admin key; True when the dev key was generated."""
    settings = Settings()
    update = {}
    if not settings.dev_api_key:
        update["dev_api_key"] = "wsk_dev_" + secrets.token_urlsafe(24)
    if not settings.admin_api_key:
        update["admin_api_key"] = "wsk_adm_" + secrets.token_urlsafe(24)
    return settings.model_copy(update=update), "dev_api_key" in update


def _start_stack(settings: Settings, state_dir: Path):  # type: ignore[no-untyped-def]
    from worldserve.dev.launcher import Stack

    stack = Stack(settings, state_dir)
    with console.status("starting the stack") as status:
        stack.start(tick=lambda msg: status.update(msg))
    return stack


def _print_endpoints(stack, generated_key: bool) -> None:  # type: ignore[no-untyped-def]
    s = stack.settings
    table = Table(title="worldserve is up", show_header=True)
    table.add_column("part")
    table.add_column("endpoint")
    table.add_column("note")
    table.add_row("gateway (gRPC)", stack.gateway_target,
                  "worldserve.v1.Simulator + Admin, health, reflection")
    if s.backend_protocol == "openai":
        table.add_row("OpenAI-compatible server", s.openai_url, "transformers serve")
    else:
        table.add_row("Triton gRPC", s.triton_url, f"model {s.model_name!r}")
        table.add_row("Triton HTTP / metrics",
                      f"127.0.0.1:{s.triton_http_port} / :{s.triton_metrics_port}", "")
    for name, url in stack.front_doors:
        table.add_row(f"{name} front door", url, "bearer: a tenant key")
    for name, url, how in stack.services.describe():
        table.add_row(name, url, how)
    console.print(table)
    note = " (generated; set WORLDSERVE_DEV_API_KEY to fix it)" if generated_key else ""
    console.print(f"dev tenant API key{note}: [bold]{s.dev_api_key}[/]")
    console.print(f"admin API key: [bold]{s.admin_api_key}[/] (worldserve admin … --api-key)")
    console.print(f"logs: {stack.state_dir / 'logs'}")


@app.command()
def up(state_dir: Path = typer.Option(STATE_DIR, help="Where bundled services keep data."),
       backend: str = typer.Option("", help="triton (default) or openai: `transformers serve` "
                                   "as an OpenAI-compatible model server instead of Triton.")
       ) -> None:
    """Start Redis/PostgreSQL (bundled if none), the model server and the gateway."""
    from worldserve.dev.launcher import supervise

    settings, generated = _settings_with_key()
    if backend:
        if backend not in ("triton", "openai"):
            raise typer.BadParameter("--backend is triton or openai")
        settings = settings.model_copy(update={"backend_protocol": backend})
    stack = _start_stack(settings, state_dir)
    stop = threading.Event()
    # Explicit handlers: a process started in the background inherits SIGINT as *ignored*, and
    # Python then never raises KeyboardInterrupt.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        _print_endpoints(stack, generated)
        console.print("press Ctrl-C to stop")
        while not stop.is_set():  # a crashed child is restarted with backoff, the rest keep going
            for event in supervise(stack.children, time.monotonic()):
                console.print(f"[yellow]{event}[/]")
            stop.wait(0.5)
    finally:
        with console.status("stopping"):
            stack.stop()
        console.print("stopped")


@app.command()
def demo(
    start: bool = typer.Option(False, "--start", help="Start the stack first and stop it after."),
    target: str = typer.Option("", help="Gateway address; default from settings."),
    api_key: str = typer.Option("", envvar="WORLDSERVE_DEV_API_KEY", help="Bearer key."),
    state_dir: Path = typer.Option(STATE_DIR, help="Where bundled services keep data."),
) -> None:
    """Run a scripted Terminal episode through the SDK, streaming each turn, and check every
    prediction against a real shell running the same commands."""
    from worldserve.cli.demo import run_episode, summary
    from worldserve.sdk import Client, WorldserveError

    settings = Settings()
    stack = None
    if start:
        settings, _ = _settings_with_key()
        stack = _start_stack(settings, state_dir)
    key = api_key or settings.dev_api_key or ""
    address = target or f"{settings.gateway_host}:{settings.gateway_port}"
    try:
        with Client(address, api_key=key) as client:
            checked = run_episode(client, console)
        console.print(f"[bold]{summary(checked)}[/] (each prediction against what bash printed)")
    except WorldserveError as exc:
        console.print(f"[red]demo failed:[/] {type(exc).__name__}: {exc}")
        raise typer.Exit(1) from exc
    finally:
        if stack is not None:
            with console.status("stopping the stack"):
                stack.stop()


@app.command()
def version() -> None:
    """Print the worldserve version."""
    from worldserve import __version__

    console.print(__version__)


if __name__ == "__main__":
    app()
