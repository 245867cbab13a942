"""The one command a lent GPU runs (scripts/device_train.sh) works end to end at its smoke size
here, on the CPU: collection, the wide model from scratch (bfloat16 export) or a ninth stage
on the committed checkpoint, and a checkpoint handed back in pieces that reassemble into one the
engine's loader reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _run(kind: str, tmp_path: Path) -> tuple[Path, Path]:
    out, work = tmp_path / "out", tmp_path / "w"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "WORK": str(work)}
    done = subprocess.run(["bash", "scripts/device_train.sh", "smoke", kind], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "cuda False" in (out / "train.log").read_text()  # it says where it trained
    parts = sorted(out.glob("model.tgz.part-*"))
    assert parts and all(p.stat().st_size <= 15 * 2**20 for p in parts)
    joined = tmp_path / "model.tgz"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(joined) as tar:
        tar.extractall(tmp_path / "back", filter="data")
    model_dir = tmp_path / "back" / "ws-model"
    assert (model_dir / "README.md").exists() and not (model_dir / "data").exists()
    return out, model_dir


def _dtypes(model_dir: Path) -> set[str]:
    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        names = f.keys()  # a safe_open handle is not iterable itself
        return {f.get_slice(k).get_dtype() for k in names}


def test_the_device_script_hands_back_a_wide_bf16_checkpoint(tmp_path: Path) -> None:
    out, model_dir = _run("wide", tmp_path)
    log = (out / "progress.log").read_text()
    assert "starts a wide model from scratch" in log
    assert "free memory goes back to the system" in log  # 16,384-token batches on a CPU
    assert json.loads((model_dir / "training.json").read_text())["profile"] == "gpu"
    assert _dtypes(model_dir) == {"BF16"}

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    assert model.config.hidden_size == 384 and model.config.num_hidden_layers == 4

    for bad in (["everything"], ["smoke", "huge"]):
        with pytest.raises(subprocess.CalledProcessError):
            subprocess.run(["bash", "scripts/device_train.sh", *bad], cwd=ROOT,
                           capture_output=True, check=True, timeout=60)


def test_the_device_script_continues_the_committed_checkpoint(tmp_path: Path) -> None:
    out, model_dir = _run("continue", tmp_path)
    log = (out / "progress.log").read_text()
    assert "stage 12 done" in log and "stage 13 starts from" in log
    training = json.loads((model_dir / "training.json").read_text())
    committed = json.loads((ROOT / "models/worldserve-tiny-moe/training.json").read_text())
    assert training["profile"] == "gpu-continue"
    assert training["stages"][:12] == committed["stages"]
    assert training["stages"][12]["steps"] >= 1 and training["stages"][12]["data_seed"] == 41
    assert _dtypes(model_dir) == {"F32"}
