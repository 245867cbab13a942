"""A throw-away bash sandbox: commands really run, and faults are really provoked.

The sandbox is a fresh directory tree; each command runs in its own ``bash -c`` there with a
scrubbed environment and a time limit, as an unprivileged user when we are root (so that
``chmod 000`` really denies). A fault is realised by a real failing execution, never by a
template:

- ``permission_denied``: the working directory is ``chmod 000`` while the command runs;
- ``timeout``: the command's program hangs (a shim that sleeps, first on ``PATH``) and GNU
  ``timeout --verbose`` cuts it off;
- ``truncated_output``: the real output piped through ``head -c N``, N the end of its first
  word (``truncation_keep``);
- ``network_unreachable``: a network command (``curl``/``wget``) against a host that does not
  resolve.

Used by training (``terminal.py``) and by ``worldserve demo`` to show the real output beside the
prediction.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

NOBODY = 65534
TIME_LIMIT_S = 5.0
HANG_LIMIT_S = "0.2"
_META = set("|&;<>()$`\\\"'*?[]{}~\n")


def truncation_keep(output: bytes) -> int:
    """Bytes of ``output`` a ``truncated_output`` fault keeps: its first word, with the
    whitespace before it; an output of one word keeps half of it (at least one byte).

    Session 34 cut half the first line, session 35 cuts at the first word's end: a half-line
    is a stop the model can only find by counting as it copies (@12 showed 1 of 5 held-out
    cuts), while the end of a word is a stop it sees: the next token would begin with a space
    or a line break. Every output of two or more words still visibly stops partway
    (docs/MODEL.md, "A truncation ends at the first word")."""
    start = len(output) - len(output.lstrip())
    word = output[start:].split(None, 1)
    if not word:
        return len(output)  # nothing but whitespace: nothing to cut
    end = start + len(word[0])
    if output[end:].strip():
        return end
    return start + max(1, len(word[0]) // 2)


class Sandbox:
    """A working directory ``cwd`` under ``root``; ``reset`` empties it.

    The sandbox poses as a whole machine: ``shown`` is the working directory as a user would
    name it (``root`` taken off, e.g. ``/home/agent``), and outputs name paths the same way."""

    def __init__(self, root: Path, cwd: Path) -> None:
        if root not in cwd.parents:
            raise ValueError("the working directory must lie under the sandbox root")
        self.root = root
        self.cwd = cwd
        self.shown = Path("/") / cwd.relative_to(root)
        self._as_nobody = os.geteuid() == 0
        self.last_full = ""  # the un-cut output of the last truncated_output run

    # -- state --------------------------------------------------------------------------------
    def reset(self, files: dict[str, str], dirs: list[str] = ()) -> None:  # type: ignore[assignment]
        """A fresh working directory holding ``files`` (relative path -> content) and ``dirs``."""
        if self.root.exists():
            _make_writable(self.root)
            shutil.rmtree(self.root)
        if self._as_nobody:
            blocked = [str(p) for p in self.root.parents if p.exists()
                       and not os.stat(p).st_mode & 0o001]
            if blocked:
                raise PermissionError(f"the sandbox user cannot reach {self.root}: {blocked[0]} "
                                      "is not searchable by others")
        self.cwd.mkdir(parents=True)
        self._write(files, dirs)

    def _write(self, files: dict[str, str], dirs: list[str]) -> None:
        for d in dirs:
            (self.cwd / d).mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            path = self.cwd / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        if self._as_nobody:
            for p in [self.root, *self.root.rglob("*")]:
                os.chown(p, NOBODY, NOBODY, follow_symlinks=False)

    def files(self) -> dict[str, str]:
        """Relative path -> content of every regular file now in the working directory."""
        out = {}
        for p in sorted(self.cwd.rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[str(p.relative_to(self.cwd))] = p.read_text(errors="replace")
        return out

    def dirs(self) -> list[str]:
        return sorted(str(p.relative_to(self.cwd)) for p in self.cwd.rglob("*") if p.is_dir())

    # -- running ------------------------------------------------------------------------------
    def run(self, command: str, fault: str = "") -> str:
        """Run ``command`` (with ``fault`` provoked for real); what the terminal shows, with
        paths named as ``shown`` names the working directory."""
        return self._as_shown(self._provoke(command, fault))

    def _as_shown(self, output: str) -> str:
        return output.replace(str(self.root), "")

    def _provoke(self, command: str, fault: str) -> str:
        if fault == "permission_denied":
            return self._denied(command)
        if fault == "timeout":
            return self._hung(command)
        if fault == "truncated_output":
            full = self._bash(command)
            self.last_full = self._as_shown(full)
            keep = truncation_keep(full.encode())
            return self._bash(f"( {command} ) 2>&1 | head -c {keep}")
        if fault in ("", "network_unreachable"):
            return self._bash(command)
        raise ValueError(f"no real realisation of fault {fault!r} in a shell")

    def _env(self, path_prefix: str = "") -> dict[str, str]:
        path = "/usr/local/bin:/usr/bin:/bin"
        return {"PATH": f"{path_prefix}:{path}" if path_prefix else path, "LC_ALL": "C",
                "HOME": str(self.cwd), "PWD": str(self.cwd)}

    def _exec(self, argv: list[str], env: dict[str, str]) -> str:
        if self._as_nobody:
            argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]
        try:
            proc = subprocess.run(argv, cwd=self.cwd,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                  timeout=TIME_LIMIT_S, check=False)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""
        else:
            out = proc.stdout
        return out.decode("utf-8", "replace").rstrip("\n")

    def _bash(self, command: str, path_prefix: str = "") -> str:
        return self._exec(["bash", "--norc", "--noprofile", "-c", command], self._env(path_prefix))

    def _denied(self, command: str) -> str:
        """Everything in the working directory ``chmod 000``, the directory itself search-only."""
        inside = list(self.cwd.rglob("*"))
        for p in reversed(inside):
            os.chmod(p, 0)
        os.chmod(self.cwd, 0o111)
        try:
            return self._bash(command)
        finally:
            os.chmod(self.cwd, 0o755)
            for p in inside:
                os.chmod(p, 0o755 if p.is_dir() else 0o644)

    def _hung(self, command: str) -> str:
        """The command's program hangs and ``timeout --verbose`` cuts it off."""
        shim = self.root / ".hang"
        shim.mkdir(exist_ok=True)
        try:
            words = shlex.split(command)
        except ValueError:
            words = []
        simple = bool(words) and not (_META & set(command))
        program = words[0] if words else "bash"
        hang = shim / Path(program).name
        hang.write_text("#!/bin/sh\nexec sleep 30\n")
        hang.chmod(0o755)
        try:
            argv = ["timeout", "--verbose", HANG_LIMIT_S, *(words if simple else
                    ["bash", "--norc", "--noprofile", "-c", command])]
            env = self._env(str(shim))
            return self._exec(argv, env)
        finally:
            shutil.rmtree(shim, ignore_errors=True)


def _make_writable(root: Path) -> None:
    for p in [root, *root.rglob("*")] if os.access(root, os.X_OK) else [root]:
        if p.is_dir() and not p.is_symlink():
            os.chmod(p, 0o755)
