"""Generated protobuf code must match protos/ (one codegen command: scripts/gen_protos.sh)."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "gen_protos.sh", tmp_path / "scripts")
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    (tmp_path / "services" / "worldserve" / "v1").mkdir(parents=True)
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(["bash", "scripts/gen_protos.sh"], cwd=tmp_path, env=env, check=True)
    fresh = tmp_path / "services" / "worldserve" / "v1"
    committed = ROOT / "services" / "worldserve" / "v1"
    names = sorted(p.name for p in fresh.iterdir() if p.is_file())
    assert "simulator_pb2.py" in names and "simulator_pb2_grpc.py" in names
    _, mismatch, errors = filecmp.cmpfiles(fresh, committed, names, shallow=False)
    assert not mismatch and not errors, f"stale generated code: {mismatch + errors}; run make proto"
