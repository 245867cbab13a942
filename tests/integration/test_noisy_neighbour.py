"""Issue 16's target with the real model: while 8 sessions step, one session sending the largest
inputs the gateway takes — over the context (refused), or the longest prompt that fits (answered)
— raises their step p99 by less than 20 %.

Runs ``bench/noisy_neighbour.py``: the committed checkpoint in a real Triton model server, a
gateway process, Redis and a scratch PostgreSQL; each attack phase between two baseline phases,
compared with all baseline samples together. p99 over a few hundred steps on a shared 2-core
machine moves by about a tenth between identical phases, so a miss is measured once more before
it counts; both runs' tables are printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import repo_root

pytestmark = pytest.mark.integration
TARGET = 1.2


def test_one_session_at_the_limits_raises_the_others_p99_by_less_than_a_fifth(
        tmp_path: Path) -> None:
    for attempt in range(2):
        out = tmp_path / f"figures-{attempt}.json"
        done = subprocess.run(
            [sys.executable, str(repo_root() / "bench" / "noisy_neighbour.py"), "--seconds",
             "15", "--sessions", "8", "--json", str(out)],
            capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        print(done.stdout)
        attacks = json.loads(out.read_text())["attacks"]
        oversize, largest = (next(a for name, a in attacks.items() if name.startswith(kind))
                             for kind in ("oversize", "largest"))
        # the attacks were real: refusals by the hundred, and the long prompt reached the model
        assert oversize["refused"] >= 50 and oversize["answered"] == 0, oversize
        assert largest["answered"] + largest["failed"] >= 1 and largest["long_share"] > 0, largest
        ratios = {name: a["p99_ratio"] for name, a in attacks.items()}
        if all(r < TARGET for r in ratios.values()):
            break
    assert all(r < TARGET for r in ratios.values()), ratios
