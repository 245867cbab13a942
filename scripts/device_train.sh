#!/usr/bin/env bash
# Train the "gpu" profile (docs/MODEL.md, "On a lent GPU") in one command on a machine that
# may have nothing of this project installed but Python with torch and transformers, and hand
# the checkpoint back in pieces small enough to come back from a lent machine.
#
#   bash scripts/device_train.sh smoke   # ~2 min: every step at a tiny size (run this first)
#   bash scripts/device_train.sh full    # the profile's budget: collect, train, evaluate
#
# Environment: OUT (where results go; default .worldserve/device-out), PYTHON (default
# python3), WORK (training work dir; default /tmp/ws-device-train). Wheels in .whl/ (the
# english-words list, which a bare machine lacks) are installed into /tmp/ws-site first.
# Results in OUT: train.log, progress.log and model.tgz.part-aa, -ab, ... (under 15 MiB each):
#   cat model.tgz.part-* | tar -xzf - -C DIR    # DIR/ws-model: the checkpoint with its card
set -euo pipefail

mode="${1:-smoke}"
out="${OUT:-.worldserve/device-out}"
py="${PYTHON:-python3}"
work="${WORK:-/tmp/ws-device-train}"
model="$(dirname "$work")/ws-model"

case "$mode" in
  smoke) args=(--episodes 48 --minutes 0.3 --vocab 600 --max-len 1024 --skip-eval) ;;
  full) args=() ;;
  *) echo "usage: $0 smoke|full" >&2; exit 2 ;;
esac

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
[ "$mode" = smoke ] && rm -rf "$work" "$model"  # a smoke run never resumes an older one
status=0
"$py" -m worldserve.training.train --profile gpu --work "$work" --out "$model" "${args[@]}" \
  2>&1 | tee -a "$out/train.log" || status=$?
cp "$work/progress.log" "$out/" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
  echo "training failed (exit $status)" | tee -a "$out/train.log"
  exit "$status"
fi
rm -f "$out"/model.tgz.part-*
tar -C "$(dirname "$model")" -czf - --exclude=ws-model/data "$(basename "$model")" \
  | split -b 15M - "$out/model.tgz.part-"
ls -l "$out"
