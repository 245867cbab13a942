"""Terminal episodes: the commands agents really use, run for real in a sandbox.

An episode starts from a directory of a few files and folders with random names and contents
(drawn from one vocabulary split, see ``words.py``), described in the initial state the way a
user would describe it; each step picks a command over what is *now* in the directory (so later
turns read what earlier ones wrote, and removed files are gone) and records bash's real output.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from worldserve.training.shell import Sandbox
from worldserve.training.words import Vocab

# Command kinds by the category the held-out report groups them in.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "listing": ("ls", "ls_dir", "ls_a", "find"),
    "reading": ("cat", "cat_two", "head", "tail"),
    "counting": ("wc", "wc_two", "grep_c", "pipe_wc"),
    "searching": ("grep", "grep_n", "grep_i", "grep_v"),
    "transforming": ("sort", "uniq_c", "cut", "tr", "sed", "awk", "pipe_grep"),
    "arithmetic": ("python_arith", "python_str", "shell_arith", "echo"),
    "writing": ("echo_new", "echo_append", "printf_new", "mkdir", "cp", "mv", "rm", "touch"),
    "errors": ("missing", "typo", "cat_dir", "mkdir_exists"),
    "other": ("pwd",),
}
# Common coreutils beyond the trained list: no committed stage drew them (``kind_weights``
# leaves them out unless asked), so an episode of them measures how a model does on commands it
# was never taught (docs/MODEL.md, "Commands beyond the trained list"); a later stage may train on
# them (``commands="all"``).
BEYOND: dict[str, tuple[str, ...]] = {
    "listing": ("ls_r", "ls_sort_r", "ls_classify"),
    "reading": ("cat_n", "nl", "head_default", "tail_default", "tac", "sed_p", "awk_nr"),
    "counting": ("wc_stdin", "awk_sum", "awk_nf"),
    "searching": ("grep_l", "grep_o", "grep_w"),
    "transforming": ("sort_u", "uniq", "rev", "paste_s", "cut_c", "tr_d", "sort_head",
                     "sed_d", "sed_g"),
    "arithmetic": ("seq", "expr"),
    "errors": ("cd_missing", "head_bad", "rmdir_full"),
    "other": ("basename", "dirname", "test_f"),
}
KIND_CATEGORY = {k: c for table in (CATEGORIES, BEYOND) for c, kinds in table.items()
                 for k in kinds}
_WEIGHTS = {"ls": 5, "ls_dir": 2, "ls_a": 1, "find": 2, "cat": 7, "cat_two": 2, "head": 2,
            "tail": 2, "wc": 3, "wc_two": 1, "grep_c": 1, "pipe_wc": 1, "grep": 3, "grep_n": 2,
            "grep_i": 1, "grep_v": 1, "sort": 2, "uniq_c": 1, "cut": 1, "tr": 1, "sed": 2,
            "awk": 1, "pipe_grep": 1, "python_arith": 2, "python_str": 1, "shell_arith": 1,
            "echo": 1, "echo_new": 4, "echo_append": 3, "printf_new": 1, "mkdir": 2, "cp": 2,
            "mv": 2, "rm": 2, "touch": 1, "missing": 2, "typo": 1, "cat_dir": 1,
            "mkdir_exists": 1, "pwd": 1}
_BEYOND_WEIGHTS = {k: 1 for kinds in BEYOND.values() for k in kinds}
COMMAND_SETS = ("trained", "beyond", "all")


def kind_weights(focus: Mapping[str, float] | None = None, commands: str = "trained"
                 ) -> dict[str, float]:
    """Each command kind's draw weight, times its category's factor in ``focus`` (a stage that
    aims at the kinds the model still gets wrong draws them more often).

    ``commands``: "trained" (the kinds every committed stage drew), "beyond" (the coreutils
    beyond that list, with the writing kinds so that episodes still carry state) or "all"."""
    focus = focus or {}
    unknown = set(focus) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"no command category {sorted(unknown)}; categories: {sorted(CATEGORIES)}")
    if commands not in COMMAND_SETS:
        raise ValueError(f"no command set {commands!r}; sets: {', '.join(COMMAND_SETS)}")
    base: dict[str, float] = (dict(_WEIGHTS) if commands != "beyond"
                              else {k: _WEIGHTS[k] for k in CATEGORIES["writing"]})
    if commands != "trained":
        base |= _BEYOND_WEIGHTS
    return {k: w * focus.get(KIND_CATEGORY[k], 1.0) for k, w in base.items()}


TYPOS = {"ls": ["lss", "sl", "lls"], "cat": ["cta", "caat", "car"], "grep": ["gerp", "grpe"],
         "echo": ["ehco", "ecoh"], "mkdir": ["mkdri", "mkidr"], "wc": ["wcc", "cw"],
         "head": ["haed", "hed"], "sort": ["srot", "sotr"], "python3": ["pyhton3", "pytohn3"]}
# Commands whose real output shows each fault (the fault is drawn only where it can show).
FAULT_KINDS = {
    "permission_denied": ("ls", "ls_dir", "cat", "cat_two", "head", "tail", "wc", "grep",
                          "grep_n", "sort", "echo_new", "echo_append", "cp", "rm", "touch"),
    "timeout": ("ls", "cat", "head", "tail", "wc", "grep", "grep_n", "sort", "find",
                "python_arith"),
    "truncated_output": ("cat", "cat_two", "ls", "find", "grep_n", "sort"),
    "network_unreachable": ("net",),
}


# Kinds of BEYOND that are one fixed command on one file ("{f}": a file of the directory, drawn
# as the other reading commands draw it) or on none: (command, reasoning).
_TEMPLATES = {
    "ls_r": ("ls -r", "ls -r lists the working directory in reverse order."),
    "ls_sort_r": ("ls | sort -r", "sort -r reverses the listing."),
    "ls_classify": ("ls -F", "ls -F marks directories with a slash."),
    "cat_n": ("cat -n {f}", "cat -n numbers the lines of {f}."),
    "nl": ("nl {f}", "nl numbers the non-empty lines of {f}."),
    "head_default": ("head {f}", "head prints up to 10 lines of {f}."),
    "tail_default": ("tail {f}", "tail prints up to the last 10 lines of {f}."),
    "tac": ("tac {f}", "tac prints the lines of {f} last first."),
    "awk_sum": ("awk '{s += $1} END {print s}' {f}", "awk adds up the first field of each line."),
    "awk_nf": ("awk '{print NF}' {f}", "awk prints each line's field count."),
    "sort_u": ("sort -u {f}", "sort -u orders the lines and drops repeats."),
    "uniq": ("sort {f} | uniq", "uniq drops repeated adjacent lines."),
    "rev": ("rev {f}", "rev reverses the characters of each line."),
    "paste_s": ("paste -sd, {f}", "paste joins the lines with commas."),
}


# Kinds whose output hangs on which line is which (counted, searched, cut at a line). In a
# stage trained with ``reasoning="lines"`` (recall.STYLES), such a command's reasoning goes on to
# list the file's lines as they are now, numbered as ``grep -n`` numbers them, before the answer
# (``TerminalEpisode.lines_reasoning``).
NUMBERED_KINDS = frozenset({"wc", "grep", "grep_n", "grep_c", "grep_v", "grep_i", "head", "tail"})


def numbered(content: str) -> str:
    """A file's lines on one line, numbered as ``grep -n`` prints them: ``1:a b | 2:c``."""
    lines = content.splitlines()
    return " | ".join(f"{i}:{line}" for i, line in enumerate(lines, 1)) if lines else "none"


@dataclass(frozen=True)
class Command:
    text: str
    kind: str
    reasoning: str


def _q(name: str) -> str:
    return shlex.quote(name)


class TerminalEpisode:
    """One episode in ``sandbox``; names and contents from ``vocab``."""

    def __init__(self, rng: random.Random, vocab: Vocab, sandbox: Sandbox,
                 weights: Mapping[str, float] = _WEIGHTS) -> None:
        self.rng, self.v, self.box = rng, vocab, sandbox
        self.kinds, self.weights = list(weights), list(weights.values())
        self.picked = ""  # the file the last command was given (``_file``)
        self.files: dict[str, str] = {}
        self.dirs: list[str] = []
        self.recent: list[str] = []  # files written by this episode's commands, newest last

    def setup(self) -> str:
        """A fresh directory; the initial state that describes it."""
        r, v = self.rng, self.v
        files: dict[str, str] = {}
        dirs = [v.dir_name() for _ in range(r.choice([0, 0, 1, 1, 2]))]
        for _ in range(r.randint(1, 4)):
            name = v.file_name()
            if dirs and r.random() < 0.25:
                name = f"{r.choice(dirs)}/{name}"
            files[name] = self._content()
        self.box.reset(files, dirs)
        self._refresh()
        return describe(self.box.shown, self.files, self.dirs, r)

    def _content(self) -> str:
        r = self.rng
        if r.random() < 0.12:
            return "".join(f"{self.v.number()}\n" for _ in range(r.randint(2, 5)))
        lines = [self.v.line(1, 5) for _ in range(r.randint(1, 4))]
        if r.random() < 0.25 and len(lines) > 1:  # repeated lines give uniq/sort work to do
            lines.append(r.choice(lines))
        return "\n".join(lines) + "\n"

    def _refresh(self) -> None:
        self.files, self.dirs = self.box.files(), self.box.dirs()

    def _file(self, prefer_recent: bool = True) -> str:
        self.picked = self._pick(prefer_recent)
        return self.picked

    def _pick(self, prefer_recent: bool) -> str:
        r = self.rng
        if not self.files:
            return self.v.file_name()
        live = [f for f in self.recent if f in self.files]
        if prefer_recent and live and r.random() < 0.5:
            return r.choice(live)
        return r.choice(sorted(self.files))

    def _line_word(self, name: str) -> str:
        words = self.files.get(name, "").split()
        if words and self.rng.random() < 0.8:
            return self.rng.choice(words)
        return self.v.word()

    def next_command(self, kind: str | None = None) -> Command:
        r = self.rng
        if kind is None:
            kind = r.choices(self.kinds, weights=self.weights)[0]
        self.picked = ""
        if kind in _TEMPLATES:
            return self._templated(kind, *_TEMPLATES[kind])
        return getattr(self, f"_k_{kind}", self._k_cat)(kind)

    def lines_reasoning(self, command: Command) -> Command:
        """``command`` with its reasoning listing the lines of the file it reads, numbered
        (``numbered``), where that is a NUMBERED_KINDS command on a file that exists now."""
        if command.kind not in NUMBERED_KINDS or self.picked not in self.files:
            return command
        return replace(command, reasoning=f"{command.reasoning} Lines: "
                                          f"{numbered(self.files[self.picked])}")

    def _templated(self, kind: str, command: str, reasoning: str) -> Command:
        if "{f}" not in command:
            return Command(command, kind, reasoning)
        f = self._file()
        return Command(command.replace("{f}", _q(f)), kind, reasoning.replace("{f}", f))

    # -- listing ----------------------------------------------------------------------------
    def _k_ls(self, kind: str) -> Command:
        return Command(self.rng.choice(["ls", "ls", "ls -1"]), kind,
                       "ls lists the working directory, sorted.")

    def _k_ls_dir(self, kind: str) -> Command:
        d = self.rng.choice(self.dirs) if self.dirs and self.rng.random() < 0.8 else self.v.dir_name()
        return Command(f"ls {_q(d)}", kind, f"ls lists {d}.")

    def _k_ls_a(self, kind: str) -> Command:
        return Command(self.rng.choice(["ls -a", "ls -A"]), kind, "ls shows hidden entries too.")

    def _k_find(self, kind: str) -> Command:
        r = self.rng
        options = ["find . -type f", "find . -type d", "find ."]
        exts = sorted({Path(f).suffix for f in self.files if Path(f).suffix})
        if exts:
            options.append(f"find . -name '*{r.choice(exts)}'")
        if self.dirs:
            options.append(f"find {_q(r.choice(self.dirs))} -type f")
        return Command(r.choice(options), kind, "find walks the tree in directory order.")

    # -- reading ------------------------------------------------------------------------------
    def _k_cat(self, kind: str) -> Command:
        f = self._file()
        return Command(f"cat {_q(f)}", kind, f"cat prints {f}.")

    def _k_cat_two(self, kind: str) -> Command:
        a, b = self._file(), self._file(prefer_recent=False)
        return Command(f"cat {_q(a)} {_q(b)}", kind, f"cat prints {a} then {b}.")

    def _k_head(self, kind: str) -> Command:
        f, n = self._file(), self.rng.randint(1, 3)
        return Command(f"head -n {n} {_q(f)}", kind, f"head prints the first {n} line(s) of {f}.")

    def _k_tail(self, kind: str) -> Command:
        f, n = self._file(), self.rng.randint(1, 3)
        return Command(f"tail -n {n} {_q(f)}", kind, f"tail prints the last {n} line(s) of {f}.")

    # -- counting -----------------------------------------------------------------------------
    def _k_wc(self, kind: str) -> Command:
        f, flag = self._file(), self.rng.choice(["-l", "-w", "-c", "-l", ""])
        cmd = f"wc {flag} {_q(f)}" if flag else f"wc {_q(f)}"
        return Command(cmd, kind, f"wc counts {f}.")

    def _k_wc_two(self, kind: str) -> Command:
        a, b = self._file(), self._file(prefer_recent=False)
        return Command(f"wc -l {_q(a)} {_q(b)}", kind, "wc counts each file, then the total.")

    def _k_grep_c(self, kind: str) -> Command:
        f = self._file()
        return Command(f"grep -c {_q(self._line_word(f))} {_q(f)}", kind,
                       f"grep -c counts matching lines of {f}.")

    def _k_pipe_wc(self, kind: str) -> Command:
        f = self._file()
        return Command(self.rng.choice([f"cat {_q(f)} | wc -l", "ls | wc -l"]), kind,
                       "wc -l counts the lines piped in.")

    # -- searching ----------------------------------------------------------------------------
    def _grep(self, kind: str, flag: str) -> Command:
        f = self._file()
        w = self._line_word(f)
        if flag == "-i":
            w = w.upper() if self.rng.random() < 0.5 else w.capitalize()
        opt = f"{flag} " if flag else ""
        return Command(f"grep {opt}{_q(w)} {_q(f)}", kind, f"grep searches {f} for {w}.")

    def _k_grep(self, kind: str) -> Command:
        return self._grep(kind, "")

    def _k_grep_n(self, kind: str) -> Command:
        return self._grep(kind, "-n")

    def _k_grep_i(self, kind: str) -> Command:
        return self._grep(kind, "-i")

    def _k_grep_v(self, kind: str) -> Command:
        return self._grep(kind, "-v")

    # -- transforming -------------------------------------------------------------------------
    def _k_sort(self, kind: str) -> Command:
        f = self._file()
        flag = self.rng.choice(["", "", "-r", "-n"])
        return Command(f"sort {flag + ' ' if flag else ''}{_q(f)}", kind, f"sort orders the lines of {f}.")

    def _k_uniq_c(self, kind: str) -> Command:
        f = self._file()
        return Command(f"sort {_q(f)} | uniq -c", kind, "uniq -c counts runs of equal lines.")

    def _k_cut(self, kind: str) -> Command:
        f, n = self._file(), self.rng.randint(1, 3)
        return Command(f"cut -d ' ' -f {n} {_q(f)}", kind, f"cut keeps field {n} of each line.")

    def _k_tr(self, kind: str) -> Command:
        f = self._file()
        spec = self.rng.choice(["a-z A-Z", "' ' '\\n'", "A-Z a-z"])
        return Command(f"tr {spec} < {_q(f)}", kind, "tr maps characters.")

    def _k_sed(self, kind: str) -> Command:
        f = self._file()
        old, new = self._line_word(f), self.v.word()
        return Command(f"sed 's/{old}/{new}/' {_q(f)}", kind, f"sed replaces {old} with {new}.")

    def _k_awk(self, kind: str) -> Command:
        f, n = self._file(), self.rng.randint(1, 2)
        return Command(f"awk '{{print ${n}}}' {_q(f)}", kind, f"awk prints field {n}.")

    def _k_pipe_grep(self, kind: str) -> Command:
        f = self._file()
        return Command(f"cat {_q(f)} | grep {_q(self._line_word(f))}", kind,
                       "grep filters the piped lines.")

    # -- arithmetic and echo ------------------------------------------------------------------
    def _k_python_arith(self, kind: str) -> Command:
        r = self.rng
        a, b = r.randint(0, 99), r.randint(0, 99)
        op = r.choice(["+", "+", "-", "*"])
        return Command(f'python3 -c "print({a}{op}{b})"', kind, "python3 evaluates the expression.")

    def _k_python_str(self, kind: str) -> Command:
        r, w = self.rng, self.v.word().lower()
        expr = r.choice([f"'{w}'.upper()", f"len('{w}')", f"'{w}'[::-1]", f"'{w}'.title()",
                         f"'{w}' + '_' + '{self.v.word()}'"])
        return Command(f'python3 -c "print({expr})"', kind, "python3 evaluates the expression.")

    def _k_shell_arith(self, kind: str) -> Command:
        a, b = self.rng.randint(0, 99), self.rng.randint(0, 99)
        return Command(f"echo $(({a} + {b}))", kind, "The shell does the arithmetic.")

    def _k_echo(self, kind: str) -> Command:
        return Command(f"echo {self.v.line(1, 4)}", kind, "echo prints its arguments.")

    # -- writing ------------------------------------------------------------------------------
    def _new_name(self) -> str:
        name = self.v.file_name()
        self.recent.append(name)
        return name

    def _k_echo_new(self, kind: str) -> Command:
        return Command(f"echo {self.v.line(1, 4)} > {_q(self._new_name())}", kind,
                       "The redirection writes the file; nothing is printed.")

    def _k_echo_append(self, kind: str) -> Command:
        f = self._file()
        self.recent.append(f)
        return Command(f"echo {self.v.line(1, 4)} >> {_q(f)}", kind,
                       f"The line is appended to {f}; nothing is printed.")

    def _k_printf_new(self, kind: str) -> Command:
        lines = "\\n".join(self.v.line(1, 3) for _ in range(self.rng.randint(2, 3)))
        return Command(f"printf '{lines}\\n' > {_q(self._new_name())}", kind,
                       "printf writes the lines to the file.")

    def _k_mkdir(self, kind: str) -> Command:
        d = self.v.dir_name()
        if self.rng.random() < 0.4:
            return Command(f"mkdir -p {_q(d)}/{_q(self.v.dir_name())}", kind,
                           "mkdir -p creates the path silently.")
        return Command(f"mkdir {_q(d)}", kind, f"mkdir creates {d}; nothing is printed.")

    def _k_cp(self, kind: str) -> Command:
        f = self._file()
        dst = (self.rng.choice(self.dirs) + "/" if self.dirs and self.rng.random() < 0.3
               else self._new_name())
        return Command(f"cp {_q(f)} {_q(dst)}", kind, f"cp copies {f}; nothing is printed.")

    def _k_mv(self, kind: str) -> Command:
        f = self._file()
        return Command(f"mv {_q(f)} {_q(self._new_name())}", kind, f"mv renames {f}.")

    def _k_rm(self, kind: str) -> Command:
        f = self._file()
        return Command(f"rm {_q(f)}", kind, f"rm deletes {f}.")

    def _k_touch(self, kind: str) -> Command:
        return Command(f"touch {_q(self._new_name())}", kind, "touch creates an empty file.")

    # -- errors -------------------------------------------------------------------------------
    def _k_missing(self, kind: str) -> Command:
        f = self.v.file_name()
        verb = self.rng.choice(["cat", "cat", "head -n 2", "wc -l", "rm", "grep x"])
        return Command(f"{verb} {_q(f)}", kind, f"{f} does not exist.")

    def _k_typo(self, kind: str) -> Command:
        real = self.rng.choice(sorted(TYPOS))
        return Command(f"{self.rng.choice(TYPOS[real])} {_q(self._file())}", kind,
                       "That command name does not exist.")

    def _k_cat_dir(self, kind: str) -> Command:
        d = self.rng.choice(self.dirs) if self.dirs else self.v.dir_name()
        return Command(f"cat {_q(d)}", kind, f"{d} is a directory.")

    def _k_mkdir_exists(self, kind: str) -> Command:
        d = self.rng.choice(self.dirs) if self.dirs else self.v.dir_name()
        return Command(f"mkdir {_q(d)}", kind, f"mkdir {d}, which may exist already.")

    def _k_pwd(self, kind: str) -> Command:
        return Command("pwd", kind, "pwd prints the working directory.")

    # -- beyond the trained list (BEYOND) -------------------------------------------------------
    def _k_sed_p(self, kind: str) -> Command:
        f, n = self._file(), self.rng.randint(1, 3)
        return Command(f"sed -n '{n}p' {_q(f)}", kind, f"sed prints line {n} of {f}.")

    def _k_awk_nr(self, kind: str) -> Command:
        f, n = self._file(), self.rng.randint(1, 3)
        return Command(f"awk 'NR=={n}' {_q(f)}", kind, f"awk prints line {n} of {f}.")

    def _k_wc_stdin(self, kind: str) -> Command:
        f, flag = self._file(), self.rng.choice(["-l", "-w", "-c"])
        return Command(f"wc {flag} < {_q(f)}", kind, "wc counts its input; no name is printed.")

    def _k_grep_l(self, kind: str) -> Command:
        a, b = self._file(), self._file(prefer_recent=False)
        return Command(f"grep -l {_q(self._line_word(a))} {_q(a)} {_q(b)}", kind,
                       "grep -l names the files that match.")

    def _k_grep_o(self, kind: str) -> Command:
        f = self._file()
        return Command(f"grep -o {_q(self._line_word(f))} {_q(f)}", kind,
                       "grep -o prints each match on its own line.")

    def _k_grep_w(self, kind: str) -> Command:
        f = self._file()
        return Command(f"grep -w {_q(self._line_word(f))} {_q(f)}", kind,
                       "grep -w matches whole words only.")

    def _k_cut_c(self, kind: str) -> Command:
        f, n = self._file(), self.rng.randint(2, 6)
        return Command(f"cut -c 1-{n} {_q(f)}", kind, f"cut keeps the first {n} characters.")

    def _k_tr_d(self, kind: str) -> Command:
        f = self._file()
        spec = self.rng.choice(["aeiou", "' '", "0-9"])
        return Command(f"tr -d {spec} < {_q(f)}", kind, "tr -d deletes those characters.")

    def _k_sort_head(self, kind: str) -> Command:
        f, n = self._file(), self.rng.randint(1, 2)
        return Command(f"sort {_q(f)} | head -n {n}", kind, f"The first {n} line(s) in order.")

    def _k_sed_d(self, kind: str) -> Command:
        f = self._file()
        return Command(f"sed '/{self._line_word(f)}/d' {_q(f)}", kind,
                       "sed deletes the matching lines.")

    def _k_sed_g(self, kind: str) -> Command:
        f = self._file()
        old = self.rng.choice(["a", "e", "o", "s", " "])
        new = self.rng.choice(["_", "X", "-"])
        return Command(f"sed 's/{old}/{new}/g' {_q(f)}", kind, "sed replaces every match.")

    def _k_seq(self, kind: str) -> Command:
        a = self.rng.randint(1, 5)
        b = a + self.rng.randint(1, 6)
        return Command(self.rng.choice([f"seq {b}", f"seq {a} {b}"]), kind,
                       "seq counts up one number a line.")

    def _k_expr(self, kind: str) -> Command:
        a, b = self.rng.randint(0, 99), self.rng.randint(1, 99)
        op = self.rng.choice(["+", "-", "\\*", "/", "%"])
        return Command(f"expr {a} {op} {b}", kind, "expr does integer arithmetic.")

    def _k_cd_missing(self, kind: str) -> Command:
        return Command(f"cd {_q(self.v.dir_name())}", kind, "That directory does not exist.")

    def _k_head_bad(self, kind: str) -> Command:
        return Command(f"head -n {self.v.word().lower()} {_q(self._file())}", kind,
                       "head needs a number of lines.")

    def _k_rmdir_full(self, kind: str) -> Command:
        full = sorted({f.split("/")[0] for f in self.files if "/" in f})
        d = self.rng.choice(full) if full else self.v.dir_name()
        return Command(f"rmdir {_q(d)}", kind, f"rmdir removes {d} only if it is empty.")

    def _k_basename(self, kind: str) -> Command:
        f = self._file()
        return Command(f"basename {_q(str(self.box.shown / f))}", kind,
                       "basename strips the directories.")

    def _k_dirname(self, kind: str) -> Command:
        f = self._file()
        return Command(f"dirname {_q(str(self.box.shown / f))}", kind,
                       "dirname strips the last component.")

    def _k_test_f(self, kind: str) -> Command:
        f = self._file() if self.rng.random() < 0.6 else self.v.file_name()
        return Command(f"test -f {_q(f)} && echo yes || echo no", kind,
                       f"test -f checks whether {f} is a file.")

    def _k_net(self, kind: str) -> Command:
        host = f"{self.v.word().lower()}.{self.rng.choice(['internal', 'example', 'corp', 'lan'])}"
        path = self.v.word().lower()
        return Command(self.rng.choice([f"curl -sS http://{host}/{path}", f"curl -fsS https://{host}/",
                                        f"curl -sS -o {_q(self.v.file_name())} http://{host}/{path}"]), kind,
                       f"The command needs to reach {host}.")

    # -- running ------------------------------------------------------------------------------
    def run(self, command: Command, fault: str = "") -> str:
        out = self.box.run(command.text, fault)
        self._refresh()
        return out


# The ways users write a state: a listing head, then each file under a content head. The first
# three heads and the first content head are all that @4 and earlier saw; stage 4 (@5) adds the
# rest, so that a state in a user's own words is still one the model has met.
STATE_HEADS = ("Working directory {cwd} contains: {listing}",
               "Current directory: {cwd}\nFiles: {listing}",
               "cwd {cwd} holds {listing}",
               "cwd {cwd}: {listing}",
               "Working directory: {cwd}\nContents: {listing}",
               "In {cwd} there are: {listing}",
               "$ pwd\n{cwd}\n$ ls\n{lines}",
               "The shell is in {cwd}; its files are {listing}.",
               "Directory {cwd} with {listing}")
FILE_HEADS = ("--- {name} ---\n{content}", "{name}:\n{content}", "$ cat {name}\n{content}",
              "== {name} ==\n{content}", "Contents of {name}:\n{content}")


def describe(cwd: Path, files: dict[str, str], dirs: list[str], rng: random.Random) -> str:
    """The initial state as a user would write it, in one of the phrasings users use."""
    head = rng.randrange(len(STATE_HEADS))
    body = 0 if rng.random() < 0.5 else rng.randrange(len(FILE_HEADS))
    return describe_as(head, cwd, files, dirs, body)


def describe_as(phrasing: int, cwd: Path, files: dict[str, str], dirs: list[str] = (),  # type: ignore[assignment]
                file_head: int = 0) -> str:
    """The listing in ``STATE_HEADS[phrasing]``, then each file's content under
    ``FILE_HEADS[file_head]``."""
    top = sorted({f.split("/")[0] + ("/" if "/" in f else "") for f in files}
                 | {d.split("/")[0] + "/" for d in dirs})
    text = STATE_HEADS[phrasing].format(cwd=cwd, listing=", ".join(top), lines="\n".join(top))
    shown = "\n".join(FILE_HEADS[file_head].format(name=n, content=c.rstrip(chr(10)))
                      for n, c in sorted(files.items()))
    return f"{text}\n{shown}" if shown else text
