#!/usr/bin/env bash
# `make test`: every test of the three products, against real parts.
#  1. unit and component tests in the workspace venv (emulator, backend, plugin core rules);
#  2. the plugin's tests inside NetBox's own venv, against a real NetBox database cloned from a cached template;
#  3. whole-system tests (emulator + backend + live NetBox with the plugin and an RQ worker).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTEST_ARGS=${PYTEST_ARGS:-}
status=0

# One pytest process per suite: each suite has its own conftest.py and fixtures.
for suite in packages/pve-emulator/tests packages/hvsync-backend/tests packages/netbox-hvsync/tests/rules; do
  echo "== $suite"
  .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS "$suite" || status=1
done

if [ -d packages/netbox-hvsync/tests/netbox ] || [ -d tests/e2e ]; then
  echo "== NetBox test instance"
  # stop it however the run ends, so the next run finds its port free
  trap '.venv/bin/python tools/netbox_instance.py down --name test' EXIT
  # a short stage-stream read timeout (the plugin's default is 120 s) keeps the timeout fault test quick
  export HVSYNC_STREAM_READ_TIMEOUT=45
  .venv/bin/python tools/netbox_instance.py up --name test --fresh
  export HVSYNC_NETBOX_ENV="$ROOT/.netbox/instances/test/env"
fi
if [ -d packages/netbox-hvsync/tests/netbox ] && ls packages/netbox-hvsync/tests/netbox/test_*.py >/dev/null 2>&1; then
  echo "== plugin tests in NetBox's venv"
  .venv/bin/python tools/netbox_instance.py pytest $PYTEST_ARGS packages/netbox-hvsync/tests/netbox || status=1
fi
for suite in tests/e2e tests/orchestration; do
  if ls $suite/test_*.py >/dev/null 2>&1; then
    echo "== $suite"
    .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS "$suite" || status=1
  fi
done
exit $status
