"""`worldserve eval`: fidelity of a model version on AgentWorldBench-format data."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from worldserve.cli.output import render
from worldserve.settings import Settings

console = Console()
SHORT = {"format_valid": "format", "exact_match": "exact", "token_f1": "F1", "rouge_l": "ROUGE-L",
         "json_structure": "JSON", "fault_visible": "fault"}  # the table fits 80 columns


def evaluate(
    data: Path = typer.Option(..., "--data", help="Directory of *_test.jsonl files."),
    model: str = typer.Option("", "--model", help="name@version (or an alias) to evaluate; "
                              "default: the deployment's default model."),
    out: Path | None = typer.Option(None, "--out", help="Results directory; default "
                                    "eval-results/<model>. Rerunning resumes."),
    concurrency: int = typer.Option(4, help="Samples in flight."),
    limit: int = typer.Option(0, help="Only the first N samples (0 = all)."),
    max_tokens: int = typer.Option(384, help="Generation budget per prediction."),
    judge_url: str = typer.Option("", help="OpenAI-compatible base URL (…/v1) of an LLM judge."),
    judge_model: str = typer.Option("", help="Judge model name."),
    judge_key: str = typer.Option("", help="Judge API key."),
    target: str = typer.Option("", "--target", help="Gateway address; default from settings."),
    api_key: str = typer.Option("", "--api-key", help="Tenant key; default WORLDSERVE_API_KEY "
                                "or the dev key."),
) -> None:
    """Replay each sample's history through the platform, predict its turn, score it."""
    from worldserve.evaluation import dataset, report
    from worldserve.evaluation.judge import Judge
    from worldserve.evaluation.runner import run
    from worldserve.sdk import AsyncClient

    try:
        samples = dataset.load(data)
    except (ValueError, KeyError) as exc:
        console.print(f"[red]cannot read {data}[/]: {exc}")
        raise typer.Exit(2) from exc
    if limit:
        samples = samples[:limit]
    settings = Settings()
    out_dir = out or Path("eval-results") / (model or "default").replace("@", "_").replace("/", "_")
    judge = Judge(judge_url, judge_model, judge_key) if judge_url else None
    address = target or f"{settings.gateway_host}:{settings.gateway_port}"
    key = api_key or settings.api_key or settings.dev_api_key or ""

    async def go():  # type: ignore[no-untyped-def]
        with Progress("[progress.description]{task.description}", BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task(f"evaluating {model or 'the default model'}", total=len(samples))
            async with AsyncClient(address, api_key=key) as client:
                return await run(samples, client, model, out_dir, concurrency=concurrency,
                                 max_tokens=max_tokens, judge=judge,
                                 progress=lambda n: bar.advance(task, n))

    result = asyncio.run(go())
    summary = report.aggregate(result.rows)
    title = f"fidelity of {model or 'the default model'} on {data}"
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    (out_dir / "report.md").write_text(report.markdown(title, summary))
    (out_dir / "report.html").write_text(report.to_html(title, summary))
    cols = report.columns(summary)
    render(console, title, ["group", *(SHORT.get(c, c) for c in cols)],
           [[name, *(report.cell(c, v.get(c)) for c in cols)] for name, v in summary.items()])
    console.print(f"{len(result.rows)} samples scored ({result.skipped} from an earlier run); "
                  f"reports in {out_dir}")
    if result.failed:
        console.print(f"[yellow]{len(result.failed)} samples failed and were not written "
                      f"(rerun to retry)[/], e.g. {result.failed[0][1]}")
        raise typer.Exit(1)


def promote(
    worldmodel: str = typer.Argument(..., help="WorldModel name."),
    version: str = typer.Option(..., "--version", help="Version the evaluation is of."),
    summary: Path = typer.Option(..., "--summary", help="summary.json written by worldserve eval."),
    namespace: str = typer.Option("default", "--namespace", "-n"),
) -> None:
    """Record an evaluation on a WorldModel; make the version stable if it passes the gate."""
    from kubernetes import client, config

    from worldserve_operator.promote import promote as run_promote

    overall = json.loads(summary.read_text()).get("overall")
    if not overall:
        console.print(f"[red]{summary} has no overall row[/]")
        raise typer.Exit(2)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    ok, reason = run_promote(client.ApiClient(), namespace, worldmodel, version, overall)
    if not ok:
        console.print(f"[red]not promoted[/]: {reason}")
        raise typer.Exit(1)
    console.print(f"{worldmodel}: {version} is now stable ({reason})")
