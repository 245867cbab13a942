"""Cut the ``truncated_output`` turns of collected episodes again, by today's rule.

    python -m worldserve.training.retruncate FILE [FILE ...]

A truncated turn keeps the real output before the cut (``Turn.normal``), so a new cut
(``shell.truncation_keep``) is made from it without running anything again: the held-out,
validation and beyond-list episodes keep every other turn exactly as collected, and the same
turns are compared before and after (session 34, docs/MODEL.md "Adopted: @12"). A
turn whose output has nothing to cut becomes a plain turn, as collection now records it.
The file is rewritten in place; its other turns and fields are left as they are.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from worldserve.training.collect import cut_shows
from worldserve.training.shell import truncation_keep


def cut(untruncated: str) -> str:
    """What ``( command ) | head -c N`` shows of ``untruncated`` with N by today's rule (the
    shell strips the trailing line break of every output)."""
    raw = untruncated.encode()
    return raw[:truncation_keep(raw)].decode("utf-8", "replace").rstrip("\n")


def recut_line(line: str) -> tuple[str, int]:
    """One JSON episode with its truncated turns cut again; and how many turns changed."""
    episode = json.loads(line)
    changed = 0
    for turn in episode["turns"]:
        if turn.get("fault") != "truncated_output":
            continue
        full = turn.get("normal", "")
        new = cut(full)
        if not cut_shows(new, full):
            new, turn["fault"], turn["normal"] = full, "", ""
        changed += new != turn["observation"] or not turn["fault"]
        turn["observation"] = new
    return json.dumps(episode, ensure_ascii=False), changed


def recut_file(path: Path) -> int:
    """Rewrite ``path`` with its truncated turns cut again; the number of turns changed."""
    lines, changed = [], 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        new, n = recut_line(line)
        lines.append(new)
        changed += n
    path.write_text("".join(f"{line}\n" for line in lines))
    return changed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args()
    for path in args.files:
        print(f"{path}: {recut_file(path)} truncated turns cut again")


if __name__ == "__main__":
    main()
