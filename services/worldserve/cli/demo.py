"""The scripted Terminal episode that `worldserve demo` streams through the SDK."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from worldserve.sdk import Client, ObservationDelta, ReasoningDelta, Restart, StepResult

INITIAL_STATE = (
    "Working directory /tmp/worldserve-sandbox/home/agent contains: notes.txt, todo.md\n"
    "--- notes.txt ---\nalpha beta\nerror config\n--- todo.md ---\nreport done"
)
TASK = "Inspect the files in the working directory and summarise them."
ACTIONS = [
    "ls",
    "cat notes.txt",
    "wc -l notes.txt",
    "pwd",
    "cat missing.txt",
    'python3 -c "print(6*7)"',
]


def run_episode(client: Client, console: Console, actions: list[str] | None = None,
                on_turn: Callable[[StepResult], None] | None = None) -> list[StepResult]:
    session = client.create_session("TERMINAL", task_instruction=TASK,
                                    initial_state=INITIAL_STATE, seed=7, labels={"demo": "1"})
    console.print(f"[bold]session[/] {session.session_id} · model {session.model_version}")
    console.print(Panel(INITIAL_STATE, title="initial state", expand=False))
    results = []
    for number, action in enumerate(actions or ACTIONS, start=1):
        console.rule(f"Turn {number}")
        console.print(Text("$ " + action, style="bold cyan"))
        in_observation = False
        result = None
        for event in client.stream_step(session.session_id, action, expected_turn=number - 1):
            if isinstance(event, ReasoningDelta):
                console.print(Text(event.text, style="dim italic"), end="")
            elif isinstance(event, ObservationDelta):
                if not in_observation:
                    console.print()
                    in_observation = True
                console.print(Text(event.text, style="bold green"), end="")
            elif isinstance(event, Restart):
                console.print(Text(f"\n[model retried: {event.reason}]", style="yellow"))
                in_observation = False
            else:
                result = event
        if result is not None and not result.observation:
            console.print(Text("(no output)", style="dim"), end="")
        console.print()
        assert result is not None
        u = result.usage
        console.print(Text(f"turn {result.turn} · {u.input_tokens} in / {u.output_tokens} out "
                           f"({u.reasoning_tokens} reasoning) · {result.finish_reason}",
                           style="dim"))
        results.append(result)
        if on_turn:
            on_turn(result)
    turns = client.close_session(session.session_id)
    console.print(f"[bold]closed[/] session with {turns} turns")
    return results
