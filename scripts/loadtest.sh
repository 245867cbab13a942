#!/usr/bin/env bash
# Headless Locust run against `worldserve up` (started here if no gateway answers), with HTML and
# CSV reports in loadtests/reports/. Settings: see loadtests/locustfile.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
BIN=$(dirname "$PY")
PORT=${WORLDSERVE_GATEWAY_PORT:-50051}
export WORLDSERVE_DEV_API_KEY=${WORLDSERVE_DEV_API_KEY:-wsk_loadtest_key}
export WORLDSERVE_API_KEY=${WORLDSERVE_API_KEY:-$WORLDSERVE_DEV_API_KEY}
export WORLDSERVE_ADMIN_API_KEY=${WORLDSERVE_ADMIN_API_KEY:-wsk_adm_loadtest_key}
started=""
if ! "$PY" -c "import socket,sys; s=socket.socket(); s.settimeout(0.5); sys.exit(s.connect_ex(('127.0.0.1', $PORT)))"; then
  "$BIN/worldserve" up --state-dir .worldserve > .worldserve-loadtest-up.log 2>&1 &
  started=$!
  trap 'kill -INT $started; wait $started' EXIT
  for _ in $(seq 1 300); do grep -q "press Ctrl-C" .worldserve-loadtest-up.log && break; sleep 1; done
fi
# a tenant with a small quota, for the quota-limited user (skipped if the Admin API refuses)
if [ -z "${WORLDSERVE_LIMITED_API_KEY:-}" ]; then
  admin=(--api-key "$WORLDSERVE_ADMIN_API_KEY" --target "127.0.0.1:$PORT")
  tenant="loadtest-limited-$$"
  if "$BIN/worldserve" admin tenant create "$tenant" "${admin[@]}" >/dev/null 2>&1; then
    "$BIN/worldserve" admin quota set "$tenant" --max-sessions 2 --max-inflight 1 "${admin[@]}" >/dev/null
    WORLDSERVE_LIMITED_API_KEY=$("$BIN/worldserve" admin key create --tenant "$tenant" --format json "${admin[@]}" \
      | "$PY" -c "import json,sys; print(json.load(sys.stdin)[0]['secret'])")
    export WORLDSERVE_LIMITED_API_KEY
  fi
fi
mkdir -p loadtests/reports
"$BIN/locust" -f loadtests/locustfile.py --headless --host "127.0.0.1:$PORT" \
  --csv loadtests/reports/worldserve --html loadtests/reports/worldserve.html --only-summary
