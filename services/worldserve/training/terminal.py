"""A throw-away bash sandbox whose real outputs become Terminal training targets.

Each episode gets a fresh directory at a fixed path (so `pwd` is stable across episodes); commands
really run in bash there, with a small time limit and a scrubbed environment.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX = Path("/tmp/worldserve-sandbox/home/agent")

WORDS = [
    "alpha", "beta", "gamma", "delta", "apple", "banana", "cherry", "river", "stone", "cloud",
    "north", "south", "red", "blue", "green", "seven", "error", "ok", "todo", "done", "log",
    "data", "cat", "dog", "report", "user", "admin", "config", "value", "test",
]
FILE_STEMS = ["notes", "todo", "data", "log", "report", "readme", "config", "users", "list"]
EXTS = [".txt", ".md", ".csv", ".log"]
DIRS = ["src", "docs", "tmp", "backup", "out", "logs", "data_dir", "build"]
TYPOS = {"ls": ["lss", "sl", "lls"], "cat": ["cta", "caat"], "echo": ["ehco", "ecoh"],
         "grep": ["gerp", "grpe"], "mkdir": ["mkdri", "mdkir"], "wc": ["wcc"]}


@dataclass
class TerminalEpisode:
    rng: random.Random
    files: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)

    def setup(self) -> str:
        """Create the sandbox with a few small files; returns the initial-state text."""
        if SANDBOX.exists():
            shutil.rmtree(SANDBOX)
        SANDBOX.mkdir(parents=True)
        for _ in range(self.rng.randint(1, 3)):
            name = self._new_file_name()
            lines = [self._phrase() for _ in range(self.rng.randint(1, 3))]
            content = "\n".join(lines) + "\n"
            (SANDBOX / name).write_text(content)
            self.files[name] = content
        listing = ", ".join(sorted(self.files))
        shown = "\n".join(f"--- {n} ---\n{c.rstrip()}" for n, c in sorted(self.files.items()))
        return f"Working directory {SANDBOX} contains: {listing}\n{shown}"

    def _phrase(self) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 4)))

    def _new_file_name(self) -> str:
        while True:
            name = self.rng.choice(FILE_STEMS) + self.rng.choice(EXTS)
            if name not in self.files:
                return name

    def _any_file(self) -> str:
        if self.files and self.rng.random() < 0.85:
            return self.rng.choice(sorted(self.files))
        return self._new_file_name()  # a missing file: real error output

    def next_command(self) -> tuple[str, str]:
        """A command and a short reasoning line that a world model could write before answering."""
        r = self.rng
        kind = r.choice([
            "ls", "ls", "cat", "cat", "echo_new", "echo_append", "echo", "mkdir", "wc", "grep",
            "python", "typo", "pwd", "head", "touch", "rm", "ls_dir",
        ])
        f = self._any_file()
        if kind == "ls":
            return r.choice(["ls", "ls -1"]), "ls lists the files in the working directory."
        if kind == "cat":
            return f"cat {f}", f"cat prints {f} if it exists, else an error."
        if kind == "echo_new":
            name = self._new_file_name()
            return f"echo {self._phrase()} > {name}", f"Redirecting creates {name}; no output."
        if kind == "echo_append":
            return f"echo {self._phrase()} >> {f}", f"Appending to {f} prints nothing."
        if kind == "echo":
            return f"echo {self._phrase()}", "echo prints its arguments."
        if kind == "mkdir":
            d = r.choice(DIRS)
            return f"mkdir {d}", f"mkdir creates {d}, or fails if it exists."
        if kind == "ls_dir":
            d = r.choice(sorted(self.dirs)) if self.dirs and r.random() < 0.7 else r.choice(DIRS)
            return f"ls {d}", f"Listing {d}, which may not exist."
        if kind == "wc":
            flag = r.choice(["-l", "-w", "-c"])
            return f"wc {flag} {f}", f"wc {flag} counts {f}."
        if kind == "grep":
            return f"grep {r.choice(WORDS)} {f}", f"grep prints matching lines of {f}."
        if kind == "python":
            a, b = r.randint(0, 99), r.randint(0, 99)
            expr = r.choice([f"print({a}+{b})", f"print({a}*{b})", f"print('{r.choice(WORDS)}'.upper())",
                             f"print(len('{r.choice(WORDS)}'))", f"print({a}/0)"])
            return f'python3 -c "{expr}"', "python3 evaluates the expression."
        if kind == "typo":
            real = r.choice(sorted(TYPOS))
            return f"{r.choice(TYPOS[real])} {f}", "This command name is misspelled."
        if kind == "pwd":
            return "pwd", "pwd prints the working directory."
        if kind == "head":
            return f"head -n 1 {f}", f"head shows the first line of {f}."
        if kind == "touch":
            name = self._new_file_name()
            return f"touch {name}", f"touch creates an empty {name} silently."
        return f"rm {f}", f"rm deletes {f}, or fails if it is missing."

    def run(self, command: str) -> str:
        """Really run ``command`` in the sandbox; stdout and stderr as a terminal shows them."""
        proc = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", command],
            cwd=SANDBOX, capture_output=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=5, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(SANDBOX)},
            check=False,
        )
        self._refresh()
        return proc.stdout.decode("utf-8", "replace").rstrip("\n")

    def _refresh(self) -> None:
        self.files = {p.name: p.read_text(errors="replace") for p in SANDBOX.iterdir() if p.is_file()}
        self.dirs = {p.name for p in SANDBOX.iterdir() if p.is_dir()}
