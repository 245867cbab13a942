#!/usr/bin/env bash
# Train a "gpu" profile (docs/MODEL.md, "On a lent GPU") in one command on a machine that
# may have nothing of this project installed but Python with torch and transformers, and hand
# the checkpoint back in pieces small enough to come back from a lent machine.
#
#   bash scripts/device_train.sh smoke [wide|continue]  # every step at a tiny size, first
#   bash scripts/device_train.sh full [wide|continue]   # the profile's budget, with evaluation
#
# wide: the gpu profile, a model twice the committed one's size from scratch; continue:
# gpu-continue, a thirteenth stage on the committed @13.
#
# Environment: EPISODES and MINUTES (full only: override the profile's data size and training
# budget, e.g. where smoke's collection rate says 24,000 episodes do not collect in 2 minutes),
# OUT (where results go; default .worldserve/device-out), PYTHON (default
# python3), WORK (default /tmp/ws-device-train: MODE/work holds data and checkpoints, a rerun
# of full resumes there; MODE/ws-model the checkpoint). Wheels in .whl/ (the
# english-words list, which a bare machine lacks) are installed into /tmp/ws-site first.
# Results in OUT: train.log, progress.log and model.tgz.part-aa, -ab, ... (under 15 MiB each):
#   cat model.tgz.part-* | tar -xzf - -C DIR    # DIR/ws-model: the checkpoint with its card
set -euo pipefail

mode="${1:-smoke}"
model_kind="${2:-wide}"
out="${OUT:-.worldserve/device-out}"
py="${PYTHON:-python3}"
base="${WORK:-/tmp/ws-device-train}/$mode"  # smoke and full never share data or weights

case "$mode" in
  smoke) args=(--episodes 48 --minutes 0.3 --vocab 600 --max-len 1024 --skip-eval) ;;
  full) args=(${EPISODES:+--episodes "$EPISODES"} ${MINUTES:+--minutes "$MINUTES"}) ;;
  *) echo "usage: $0 smoke|full [wide|continue]" >&2; exit 2 ;;
esac
case "$model_kind" in
  wide) args+=(--profile gpu) ;;
  continue) args+=(--profile gpu-continue --continue-from models/worldserve-tiny-moe) ;;
  *) echo "usage: $0 smoke|full [wide|continue]" >&2; exit 2 ;;
esac
base="$base-$model_kind"
work="$base/work"
model="$base/ws-model"

mkdir -p "$out"
export PYTHONPATH="$PWD/services${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" > /dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/ws-site .whl/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/ws-site"
fi
export PYTHONUNBUFFERED=1
"$py" - <<'EOF' 2>&1 | tee "$out/train.log"
import os, torch, transformers
print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
      f"cuda {torch.cuda.is_available()}"
      + (f" ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "")
      + f", {len(os.sched_getaffinity(0))} cores")
EOF
if [ "$mode" = smoke ]; then rm -rf "$base"; fi  # a smoke run starts afresh; full resumes
status=0
"$py" -m worldserve.training.train --work "$work" --out "$model" "${args[@]}" \
  2>&1 | tee -a "$out/train.log" || status=$?
cp "$work/progress.log" "$out/" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
  echo "training failed (exit $status)" | tee -a "$out/train.log"
  exit "$status"
fi
rm -f "$out"/model.tgz.part-*
tar -C "$base" -czf - --exclude=ws-model/data ws-model \
  | split -b 15M - "$out/model.tgz.part-"
ls -l "$out"
