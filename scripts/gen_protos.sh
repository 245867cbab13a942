#!/usr/bin/env bash
# The one codegen command: protos/ -> services/worldserve/v1/ (committed; CI fails when stale).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export PATH="$(dirname "$PY"):$PATH"
out=services
"$PY" -m grpc_tools.protoc -I protos \
  --python_out="$out" --grpc_python_out="$out" --mypy_out="$out" \
  protos/worldserve/v1/*.proto
touch "$out/worldserve/v1/__init__.py"
