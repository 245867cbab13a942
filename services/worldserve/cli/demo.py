"""The scripted Terminal episode that `worldserve demo` streams through the SDK, checked against
a real shell.

Every command also runs in a real throw-away sandbox (``training/shell.py``) holding the files
the initial state describes — an injected fault is provoked there for real too — so each turn is
marked exact or not, a wrong prediction is shown above what bash really printed, and the run
ends with "N of M turns exact". The episode writes a file in one turn and reads it in a later
one, and one turn carries an injected fault.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from worldserve.sdk import (
    Client,
    FaultPolicy,
    ObservationDelta,
    ReasoningDelta,
    Restart,
    StepResult,
)
from worldserve.training.shell import Sandbox
from worldserve.training.terminal import describe_as

FILES = {
    "notes.txt": "meeting with ravel at noon\nerror budget is low\nship the parser\n",
    "todo.md": "fix login bug\nwrite release notes\n",
}
TASK = "Inspect the files in the working directory and keep a reminder."
ACTIONS = [
    "ls",
    "cat notes.txt",
    "echo call the plumber > reminder.txt",
    "grep -n error notes.txt",
    "cat reminder.txt",
    "wc -l notes.txt",
    "cat todo.md",
]
FAULT_TURN = 7  # `cat todo.md` meets an injected permission_denied
FAULT = FaultPolicy(kinds=("permission_denied",), turns=(FAULT_TURN,))


@dataclass(frozen=True)
class CheckedTurn:
    result: StepResult
    real: str

    @property
    def exact(self) -> bool:
        return self.result.observation.strip() == self.real.strip()


def make_sandbox() -> Sandbox:
    root = Path(tempfile.mkdtemp(prefix="worldserve-demo-"))
    os.chmod(root, 0o755)  # the sandbox user must reach the working directory
    sandbox = Sandbox(root, root / "home" / "agent")
    sandbox.reset(FILES)
    return sandbox


def _stream(client: Client, console: Console, session_id: str, action: str, turn: int
            ) -> StepResult:
    in_observation = False
    result = None
    for event in client.stream_step(session_id, action, expected_turn=turn):
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
    assert result is not None
    if not in_observation:
        console.print()
    if not result.observation:
        console.print(Text("(no output)", style="dim"), end="")
    console.print()
    return result


def run_episode(client: Client, console: Console, actions: list[str] | None = None,
                on_turn: Callable[[CheckedTurn], None] | None = None) -> list[CheckedTurn]:
    sandbox = make_sandbox()
    try:
        state = describe_as(0, sandbox.shown, FILES)  # phrased as the training data's first
        session = client.create_session("TERMINAL", task_instruction=TASK, initial_state=state,
                                        seed=7, temperature=0.0, faults=FAULT,
                                        labels={"demo": "1"})  # greedy: the model's best guess
        console.print(f"[bold]session[/] {session.session_id} · model {session.model_version}")
        console.print(Panel(state, title="initial state", expand=False))
        checked = []
        for number, action in enumerate(actions or ACTIONS, start=1):
            console.rule(f"Turn {number}")
            console.print(Text("$ " + action, style="bold cyan"))
            result = _stream(client, console, session.session_id, action, number - 1)
            turn = CheckedTurn(result, sandbox.run(action, result.fault_kind))
            u = result.usage
            console.print(Text(f"turn {result.turn} · {u.input_tokens} in / {u.output_tokens} "
                               f"out ({u.reasoning_tokens} reasoning) · {result.finish_reason}",
                               style="dim"))
            if result.fault_kind:
                console.print(Text(f"injected fault: {result.fault_kind}", style="magenta"))
            if turn.exact:
                console.print(Text("✓ exact: bash printed the same", style="green"))
            else:
                console.print(Text("✗ not exact; bash really printed:", style="red"))
                console.print(Text(turn.real or "(no output)", style="yellow"))
            checked.append(turn)
            if on_turn:
                on_turn(turn)
        turns = client.close_session(session.session_id)
        console.print(f"[bold]closed[/] session with {turns} turns")
        return checked
    finally:
        shutil.rmtree(sandbox.root, ignore_errors=True)


def summary(checked: list[CheckedTurn]) -> str:
    return f"{sum(t.exact for t in checked)} of {len(checked)} turns exact"
