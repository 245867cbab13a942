"""`worldserve export | import | replay`: trajectories from the command line (tenant key)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console

from worldserve.cli.output import render
from worldserve.settings import Settings

console = Console(stderr=True)
TARGET = typer.Option("", "--target", help="Gateway address; default from settings.")
API_KEY = typer.Option("", "--api-key", help="Tenant key; default WORLDSERVE_API_KEY or the "
                       "dev key.")


@contextmanager
def _client(target: str, api_key: str) -> Iterator[object]:
    from worldserve.sdk import Client, WorldserveError

    settings = Settings()
    address = target or f"{settings.gateway_host}:{settings.gateway_port}"
    key = api_key or settings.api_key or settings.dev_api_key or ""
    try:
        with Client(address, api_key=key) as client:
            yield client
    except WorldserveError as exc:
        console.print(f"[red]{type(exc).__name__}[/]: {exc}")
        raise typer.Exit(1) from exc


def export(session_id: str,
           fmt: str = typer.Option("agentworldbench", "--format",
                                   help="agentworldbench (JSONL) or json."),
           forks: bool = typer.Option(False, "--forks", help="Include the whole fork tree."),
           out: Path | None = typer.Option(None, "-o", "--out", help="File; default stdout."),
           target: str = TARGET, api_key: str = API_KEY) -> None:
    """Export a session (and its forks) as AgentWorldBench JSONL or the SDK's JSON."""
    with _client(target, api_key) as client:
        result = client.export(session_id, format=fmt, include_forks=forks)  # type: ignore[attr-defined]
    if out is None:
        sys.stdout.buffer.write(result.content)
    else:
        out.write_bytes(result.content)
    console.print(f"exported {result.metadata}")


def import_(path: Path = typer.Argument(..., help="AgentWorldBench JSONL file."),
            domain: str = typer.Option("", help="Domain; default the record's task."),
            model: str = typer.Option("", help="Model alias or name@version."),
            target: str = TARGET, api_key: str = API_KEY) -> None:
    """Start a session whose history is a recorded trajectory; prints its id."""
    with _client(target, api_key) as client:
        info = client.import_trajectory(path.read_bytes(), domain=domain,  # type: ignore[attr-defined]
                                        model=model)
    print(info.session_id)
    console.print(f"{info.turn_count} turns imported into {info.session_id} ({info.domain})")


def replay(session_id: str,
           model: str = typer.Option("", help="Model version to replay on."),
           fmt: str = typer.Option("table", "--format", help="table, csv or json."),
           target: str = TARGET, api_key: str = API_KEY) -> None:
    """Re-simulate a session's actions on another model version; per-turn differences."""
    from worldserve.sdk.replay import replay as run

    with _client(target, api_key) as client:
        report = run(client, session_id, model=model)  # type: ignore[arg-type]
    rows = [[d.turn, d.action[:40], "yes" if d.exact else "no", f"{d.similarity:.2f}",
             d.recorded[:60], d.replayed[:60]] for d in report.diffs]
    render(Console(), f"replay of {session_id} ({report.source_model}) on {report.replay_model}",
           ["turn", "action", "exact", "similarity", "recorded", "replayed"], rows, fmt)
    if fmt == "table":
        Console().print(f"exact {report.exact_rate:.0%}, mean similarity "
                        f"{report.mean_similarity:.2f} over {len(report.diffs)} turns")
