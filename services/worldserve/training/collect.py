"""Play episodes against the real sandbox and tool server; write them as JSONL.

An episode is what a session would hold: domain, task, initial state, then turns of (action,
real observation, a short reasoning line, command kind, fault kind). The last turn of about one
episode in four carries a fault, realised for real and paired with exactly the control
instruction the gateway sends for it (``domains/faults.py``). ``sequence.py`` turns an episode
into the prompt the gateway renders and the answers the model must give.

Collection runs in worker processes (each with its own sandbox directory and tool server) and
appends to the output file as it goes, so a rerun continues where a killed one stopped.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from worldserve.domains.faults import DOMAIN_KINDS
from worldserve.domains.faults import KINDS as FAULT_KINDS
from worldserve.domains.templates import Domain
from worldserve.evaluation.metrics import fault_visible
from worldserve.training import arith, recall, terminal
from worldserve.training.mcp_tools import McpEpisode, ToolServer, check_focus
from worldserve.training.shell import Sandbox
from worldserve.training.words import Vocab

SANDBOX_ROOT = Path("/tmp/worldserve-sandbox")
MAX_TURNS = 8  # with the gateway's window 4 / stride 4, turns 1–8 are all shown verbatim
FAULT_RATE = 0.25
# (Terminal command category, "mcp:" + an MCP tool kind, or "fault:" + a fault kind; draw
# factor); () draws as usual
Focus = tuple[tuple[str, float], ...]
MCP_FOCUS = "mcp:"
FAULT_FOCUS = "fault:"
TERMINAL_TASKS = [
    "Inspect the files in the working directory and summarise them.",
    "Tidy the directory and count the lines in every file.",
    "Find which files mention a given word and keep a copy of them.",
    "Set up a small project layout and record progress in a todo file.",
    "Check the data files and fix what is wrong.",
    "",
]
MCP_TASKS = [
    "Use the tools to record the items and read them back.",
    "Keep the records up to date with the tools.",
    "Look up what was stored and clean up the rest.",
    "",
]


@dataclass
class Turn:
    action: str
    observation: str
    reasoning: str
    kind: str
    fault: str = ""
    normal: str = ""  # truncated_output turns: the output before it was cut


@dataclass
class Episode:
    domain: str
    split: str
    index: int
    task: str
    initial_state: str
    turns: list[Turn] = field(default_factory=list)

    @classmethod
    def from_json(cls, line: str) -> Episode:
        raw = json.loads(line)
        raw["turns"] = [Turn(**t) for t in raw["turns"]]
        return cls(**raw)


def terminal_sandbox(worker: int, rng: random.Random, vocab: Vocab) -> Sandbox:
    """A sandbox whose working directory has a varied, realistic-looking path."""
    root = SANDBOX_ROOT / f"p{os.getpid()}w{worker}"  # one per process: collectors may overlap
    user = vocab.stem().lower()
    cwd = rng.choice([root / "home" / user, root / "home" / user / vocab.stem(),
                      root / "srv" / vocab.stem(), root / "work" / user])
    return Sandbox(root, cwd)


# With reasoning "lines", the share of fault-free Terminal episodes whose last command is one
# that lists lines in its reasoning: only the last answer's reasoning is trained (sequence.py),
# and without this 1,199 of the lines profile's 16,000 episodes (7.5 %) ended on one.
LINES_LAST = 0.5
# With reasoning "arith", the share of fault-free Terminal episodes whose last command computes
# (arith.TERMINAL_KINDS that the stage draws): the worked reasoning is trained on last turns only.
ARITH_LAST = 0.5


def terminal_episode(index: int, rng: random.Random, vocab: Vocab, worker: int, turns: int,
                     fault_rate: float = FAULT_RATE,
                     weights: Mapping[str, float] | None = None, reasoning: str = "plain",
                     fault_weights: Mapping[str, float] | None = None) -> Episode:
    """``weights``: each command kind's draw weight (``terminal.kind_weights``);
    ``fault_weights``: fault kind factors (``pick_fault``); ``reasoning``
    "lines": a command that reads lines lists them, numbered, in its reasoning (recall.STYLES);
    "arith": the last command computes more often (ARITH_LAST)."""
    env = terminal.TerminalEpisode(rng, vocab, terminal_sandbox(worker, rng, vocab),
                                   weights or terminal.kind_weights())
    ep = Episode(Domain.TERMINAL.value, vocab.split, index, rng.choice(TERMINAL_TASKS),
                 env.setup())
    computing = sorted(set(arith.TERMINAL_KINDS) & set(env.kinds))
    fault = ""
    allowed = [k for k in DOMAIN_KINDS[Domain.TERMINAL] if k in terminal.FAULT_KINDS]
    if allowed and rng.random() < fault_rate:
        fault = pick_fault(rng, allowed, fault_weights)
    for t in range(turns):
        last = t == turns - 1
        kind = rng.choice(terminal.FAULT_KINDS[fault]) if last and fault else None
        if reasoning == recall.LINES and last and not fault and rng.random() < LINES_LAST:
            kind = rng.choice(sorted(terminal.NUMBERED_KINDS))
        if (reasoning == arith.ARITH and last and not fault and computing
                and rng.random() < ARITH_LAST):
            kind = rng.choice(computing)
        cmd = env.next_command(kind)
        f = fault if last else ""
        if reasoning == recall.LINES and not f:  # a fault turn never reads what it would list
            cmd = env.lines_reasoning(cmd)
        out = env.run(cmd, f)
        full = env.box.last_full if f == "truncated_output" else ""
        if f == "truncated_output" and not cut_shows(out, full):
            f = full = ""
        ep.turns.append(Turn(cmd.text, out, cmd.reasoning, cmd.kind, f, full))
    return ep


def cut_shows(observation: str, untruncated: str) -> bool:
    """Whether a truncated turn's output shows its cut. One that cannot (an empty grep, one
    byte) is recorded as the plain turn it was: here, and when ``retruncate`` cuts a
    collected set again."""
    return fault_visible("truncated_output", observation, observation, untruncated)


def split_focus(focus: Focus) -> tuple[dict[str, float], dict[str, float]]:
    """(Terminal category factors, MCP tool kind factors) of a focus; unknown names fail.
    Fault kind factors ("fault:" entries) are ``fault_focus``'s."""
    mcp = {k.removeprefix(MCP_FOCUS): f for k, f in focus if k.startswith(MCP_FOCUS)}
    check_focus(mcp)
    return {k: f for k, f in focus if not k.startswith((MCP_FOCUS, FAULT_FOCUS))}, mcp


def fault_focus(focus: Focus) -> dict[str, float]:
    """The fault kind factors of a focus ("fault:" entries); an unknown kind fails."""
    factors = {k.removeprefix(FAULT_FOCUS): f for k, f in focus if k.startswith(FAULT_FOCUS)}
    unknown = set(factors) - set(FAULT_KINDS)
    if unknown:
        raise ValueError(f"no fault kind {sorted(unknown)}; kinds: {', '.join(FAULT_KINDS)}")
    return factors


def pick_fault(rng: random.Random, allowed: Sequence[str],
               factors: Mapping[str, float] | None = None) -> str:
    """One of ``allowed``, each as likely as the others times its factor (default 1); without
    factors the draw is ``rng.choice``, so an unfocused collection is the one it always was."""
    if not factors:
        return rng.choice(allowed)
    return rng.choices(allowed, [factors.get(k, 1.0) for k in allowed])[0]


def mcp_episode(index: int, rng: random.Random, vocab: Vocab, server: ToolServer, turns: int,
                fault_rate: float = FAULT_RATE, focus: Mapping[str, float] | None = None,
                fault_weights: Mapping[str, float] | None = None) -> Episode:
    env = McpEpisode(rng, vocab, server, focus)
    ep = Episode(Domain.MCP.value, vocab.split, index, rng.choice(MCP_TASKS), env.setup())
    fault = (pick_fault(rng, DOMAIN_KINDS[Domain.MCP], fault_weights)
             if rng.random() < fault_rate else "")
    for t in range(turns):
        last = t == turns - 1
        action, kind, why = env.next_call()
        f = fault if last else ""
        ep.turns.append(Turn(action, env.run(action, f), why, kind, f))
    return ep


@dataclass(frozen=True)
class Draw:
    """What a collection run draws (``collect``'s arguments of the same names, which own the
    defaults)."""

    fault_rate: float
    focus: Focus
    commands: str
    reasoning: str
    pieces: tuple[str, ...]
    piece_share: float
    piece_weights: tuple[float, ...]


@dataclass(frozen=True)
class Job:
    """One collecting worker's share: every ``workers``-th index from ``first`` below ``count``,
    appended to ``path``.part<worker>."""

    worker: int
    workers: int
    count: int
    seed: int
    split: str
    first: int
    path: str
    draw: Draw


def _episodes(job: Job) -> Iterator[Episode]:
    draw = job.draw
    server = ToolServer()
    shell_focus, tool_focus = split_focus(draw.focus)
    faults = fault_focus(draw.focus)
    weights = terminal.kind_weights(shell_focus, draw.commands)  # once per worker, not per episode
    try:
        for index in range(job.first, job.count, job.workers):
            rng = random.Random(f"{job.seed}:{job.split}:{index}")
            vocab = Vocab(rng, job.split, draw.pieces, draw.piece_share, draw.piece_weights)
            turns = rng.randint(2, MAX_TURNS)
            if index % 3 == 2:
                yield mcp_episode(index, rng, vocab, server, turns, draw.fault_rate, tool_focus,
                                  faults)
            else:
                yield terminal_episode(index, rng, vocab, job.worker, turns, draw.fault_rate,
                                       weights, draw.reasoning, faults)
    finally:
        server.close()


def _work(job: Job) -> int:
    n = 0
    with open(f"{job.path}.part{job.worker}", "a") as fh:
        for ep in _episodes(job):
            fh.write(json.dumps(asdict(ep)) + "\n")
            fh.flush()
            n += 1
    return n


def collect_workers(cores: int | None = None) -> int:
    """Collecting processes for a machine: one per core but one, at least 2, at most 16."""
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    return max(2, min(16, cores - 1))


def collect(path: Path, count: int, seed: int, split: str = "train",
            workers: int = 2, progress: bool = True,
            fault_rate: float = FAULT_RATE, focus: Focus = (),
            commands: str = "trained", reasoning: str = "plain",
            pieces: Sequence[str] = (), piece_share: float = 0.0,
            piece_weights: Sequence[float] = ()) -> list[Episode]:
    """``count`` episodes in ``path`` (JSONL, ordered by index); resumes a partial run.

    ``fault_rate``: the share of episodes whose last turn carries a fault. ``focus``: (command
    category, factor) pairs that scale how often Terminal commands of a category are drawn, and
    ("mcp:" + tool kind, factor) pairs for MCP tools (``mcp_tools.OPTIONAL_KINDS``).
    ``commands``: which Terminal command kinds are drawn (``terminal.COMMAND_SETS``).
    ``reasoning``: the reasoning the turns carry (``recall.STYLES``; only "lines" is written
    here, the others are made from the turns when a stage encodes them). ``pieces``,
    ``piece_share``, ``piece_weights``: piece words among the words drawn (``words.Vocab``)."""
    terminal.kind_weights(split_focus(focus)[0], commands)  # fails here, not in a worker
    fault_focus(focus)
    recall.check_style(reasoning)
    Vocab(random.Random(0), split, pieces, piece_share, piece_weights)  # bad ones fail here
    if path.exists():
        have = [Episode.from_json(line) for line in path.open()]
        if len(have) >= count:
            return have[:count]
    parts = [Path(f"{path}.part{w}") for w in range(workers)]
    done: dict[int, Episode] = {}
    # Any earlier run's parts, whatever its worker count: an episode depends on its index only.
    earlier = sorted(path.parent.glob(f"{path.name}.part*"))
    for part in earlier:
        for line in part.open():
            try:
                ep = Episode.from_json(line)
            except (json.JSONDecodeError, TypeError):
                continue  # a line cut off by a crash
            done[ep.index] = ep
    for w, part in enumerate(parts):
        part.write_text("".join(json.dumps(asdict(done[i])) + "\n" for i in sorted(done)
                                if i % workers == w))
    for part in set(earlier) - set(parts):
        part.unlink()
    # Each worker takes every workers-th index, from the first of its own not yet collected.
    t0 = time.time()
    draw = Draw(fault_rate, focus, commands, reasoning, tuple(pieces), piece_share,
                tuple(piece_weights))
    jobs = []
    for w in range(workers):
        first = w
        while first in done:
            first += workers
        jobs.append(Job(w, workers, count, seed, split, first, str(path), draw))
    if progress:
        print(f"collecting {count - len(done)} {split} episodes ({len(done)} kept)", flush=True)
    if workers == 1:
        _work(jobs[0])
    else:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(workers) as pool:
            pool.map(_work, jobs)
    episodes: dict[int, Episode] = {}
    for part in parts:
        for line in part.open():
            ep = Episode.from_json(line)
            episodes[ep.index] = ep
    ordered = [episodes[i] for i in sorted(episodes)][:count]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(asdict(e)) + "\n" for e in ordered))
    os.replace(tmp, path)
    for part in parts:
        part.unlink()
    if progress:
        print(f"collected {len(ordered)} {split} episodes in {time.time() - t0:.0f}s", flush=True)
    return ordered
