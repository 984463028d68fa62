#!/usr/bin/env bash
# `make test`: every test of the three products, against real parts.
#  1. unit and component tests in the workspace venv (emulator, real Proxmox tools against the emulator,
#     backend, plugin core rules);
#  2. the plugin's tests inside NetBox's own venv, against a real NetBox database cloned from a cached template;
#  3. whole-system tests (emulator + backend + live NetBox with the plugin and an RQ worker), the sync
#     suite once more on the REST path (beside 4);
#  4. the NetBox release matrix: on every other supported release the plugin migrates, its in-NetBox tests
#     pass and a full sync of the demo cluster through the plugin converges; then the synced 4.5.8
#     database is upgraded to the default release and a resync writes nothing. 4.7.0's sync runs in the
#     plugin's wheel installed into a NetBox 4.7.0 set up as an operator does (not by our tooling).
# NETBOX_VERSION=<release> runs 1-3 on that release instead of the default (4.7.3) and skips the matrix;
# HVSYNC_NETBOX_MATRIX="4.6.8" narrows the matrix ("" turns it off).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTEST_ARGS=${PYTEST_ARGS:-}
TOOL=(.venv/bin/python tools/netbox_instance.py)
status=0
started=$SECONDS

if [ -z "${NETBOX_VERSION:-}" ]; then
  MATRIX=${HVSYNC_NETBOX_MATRIX-4.5.8 4.6.8 4.7.0}
else
  MATRIX=""
fi
# Every release's venv and migrated template database is made in the background from the start, the
# default release's first (one migration is single-threaded Python: it overlaps the unit tests on the
# second core, and `up` below waits on the template's lock instead of migrating on the critical path).
mkdir -p .netbox
(for v in "${NETBOX_VERSION:-}" $MATRIX; do NETBOX_VERSION=$v "${TOOL[@]}" template || exit 1; done) \
  >.netbox/templates.log 2>&1 &
templates_pid=$!

# the browser tests (emulator docs offline, the plugin's sync-run page) drive Debian's chromium
bash tools/ensure-chromium.sh

# One pytest process per suite: each suite has its own conftest.py and fixtures.
# tests/tools: real Proxmox clients (prometheus-pve-exporter, Ansible's community.proxmox, proxmoxer) from
# a venv of their own, run unchanged against emulator processes
for suite in packages/pve-emulator/tests tests/tools packages/hvsync-backend/tests packages/netbox-hvsync/tests/rules; do
  echo "== $suite"
  .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS "$suite" || status=1
done

# a short stage-stream read timeout (the plugin's default is 120 s) keeps the timeout fault tests quick
export HVSYNC_STREAM_READ_TIMEOUT=45

# The matrix releases' in-NetBox tests need no running instance (each clones its own database and starts
# its own backend on a free port): they run beside the default release's in-NetBox suite and the
# whole-system suites below (one pytest process uses one of the two cores), and their output is shown
# when they finish. Each waits on its release's template lock, so it starts as soon as the background
# build above has made that release.
if [ -n "$MATRIX" ]; then
  rm -f .netbox/matrix-*.log .netbox/matrix-*.failed
  (for v in $MATRIX; do
    # the REST fuzz run (minutes) runs once, on the default release: the plugin's input handling is the same
    NETBOX_VERSION=$v "${TOOL[@]}" pytest $PYTEST_ARGS packages/netbox-hvsync/tests/netbox \
      --ignore=packages/netbox-hvsync/tests/netbox/test_rest_fuzz.py >".netbox/matrix-$v.log" 2>&1 \
      || touch ".netbox/matrix-$v.failed"
  done) &
  matrix_tests_pid=$!
fi

# NetBox's own tests, with hvsync installed and without (tools/netbox_core_tests.py: the whole
# virtualization app, dcim's and ipam's test_missing_filters, on clones of the templates): a test that
# fails only with hvsync fails the run. In the background beside the suites below (it waits on the
# templates' locks as they do); its output follows at the end (show_netbox_tests, also on an early exit).
netbox_tests_pid=""
(
  ran=0
  .venv/bin/python tools/netbox_core_tests.py || ran=$?
  echo "== NetBox's own tests done after $((SECONDS - started)) s"
  exit $ran
) >.netbox/netbox-own-tests.log 2>&1 &
netbox_tests_pid=$!
show_netbox_tests() {
  if [ -z "$netbox_tests_pid" ]; then return; fi
  local ran=0
  wait "$netbox_tests_pid" || ran=$?
  netbox_tests_pid=""
  echo "== NetBox's own tests with and without hvsync (tools/netbox_core_tests.py): its output"
  cat .netbox/netbox-own-tests.log
  if [ "$ran" != 0 ]; then status=1; fi
}

echo "== plugin tests in NetBox's venv (NetBox ${NETBOX_VERSION:-default})"
# on the Redis databases of the `test` instance, which starts after it (a previous run's is stopped
# first): the matrix releases' suites beside it have the pytest runs' own. The REST fuzz run (minutes,
# mostly waiting on NetBox) goes beside it in a pytest process of its own, on the Redis databases of the
# `demo` instance (not started by make test before the demo's signal test, which runs much later).
"${TOOL[@]}" down --name test >/dev/null
"${TOOL[@]}" down --name demo >/dev/null
REST_FUZZ=packages/netbox-hvsync/tests/netbox/test_rest_fuzz.py
HVSYNC_PYTEST_REDIS_OF=demo "${TOOL[@]}" pytest $PYTEST_ARGS "$REST_FUZZ" >.netbox/rest-fuzz.log 2>&1 &
rest_fuzz_pid=$!
HVSYNC_PYTEST_REDIS_OF=test "${TOOL[@]}" pytest $PYTEST_ARGS packages/netbox-hvsync/tests/netbox \
  --ignore="$REST_FUZZ" || status=1
echo "== $REST_FUZZ (run beside the suite above): its output"
wait "$rest_fuzz_pid" || { cat .netbox/rest-fuzz.log; status=1; }
grep -E "passed|failed|error" .netbox/rest-fuzz.log | tail -n 3

echo "== NetBox test instance (NetBox ${NETBOX_VERSION:-default})"
# However the run ends, nothing it started is left behind: the REST-path e2e run below is waited for
# (its own fixtures stop its NetBox), the `test` instance and the install check are stopped, so the next
# run finds their ports free. Each pid below is cleared once its job is finished with, so the handler
# does nothing twice.
rest_path_pid=""
install_check_pid=""
show_rest_path() {
  # wait for the REST-path run, if one is going, and show its output (also before an early exit)
  if [ -z "$rest_path_pid" ]; then return; fi
  local ran=0
  if kill -0 "$rest_path_pid" 2>/dev/null; then
    echo "== waiting for the REST-path e2e run to end (its fixtures stop its NetBox)"
  fi
  wait "$rest_path_pid" || ran=$?
  rest_path_pid=""
  echo "== tests/e2e on the REST path (HVSYNC_NETBOX_APPLY_PATH=false): its output"
  cat .netbox/e2e-rest-path.log
  if [ "$ran" != 0 ]; then status=1; fi
}
# The long-sync run (tests/orchestration/test_long_sync.py), started below beside the whole-system suites:
# waited for and shown at the end (or before an early exit), counted in `status`.
long_sync_pid=""
show_long_sync() {
  if [ -z "$long_sync_pid" ]; then return; fi
  local ran=0
  if kill -0 "$long_sync_pid" 2>/dev/null; then
    echo "== waiting for the long-sync run to end (its fixtures stop its NetBox)"
  fi
  wait "$long_sync_pid" || ran=$?
  long_sync_pid=""
  echo "== tests/orchestration/test_long_sync.py (a sync longer than NetBox's 300 s job timeout) and"
  echo "   tests/e2e/test_backend_fuzz.py, tests/e2e/test_demo_signals.py (make demo stops on SIGINT and SIGTERM): their output"
  cat .netbox/long-sync.log
  if [ "$ran" != 0 ]; then status=1; fi
}
on_exit() {
  show_rest_path
  show_netbox_tests
  show_long_sync
  "${TOOL[@]}" down --name test
  if [ -n "$install_check_pid" ]; then .venv/bin/python tools/install_check.py stop; fi
}
trap on_exit EXIT
"${TOOL[@]}" up --name test --fresh
export HVSYNC_NETBOX_ENV="$ROOT/.netbox/instances/test/env"

# A sync that outlasts NetBox's default 300 s RQ job timeout completes (the emulator slowed down; the
# plugin's own job timeout). It mostly waits, so it runs in the background on its own instance
# (`long-sync`, started by the orchestration fixtures) beside the suites below; output at the end.
# Then, in the same background run, the backend's fuzz run against a real NetBox and `make demo`'s
# signal handling (the real launcher on the `demo`
# instance's slot, three starts of it): neither depends on the suites below nor they on it.
echo "== tests/orchestration/test_long_sync.py, tests/e2e/test_backend_fuzz.py, tests/e2e/test_demo_signals.py in the background (.netbox/long-sync.log)"
(
  ran=0
  env -u HVSYNC_NETBOX_ENV HVSYNC_ORCH_INSTANCE=long-sync .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS \
    tests/orchestration/test_long_sync.py || ran=$?
  echo "== long-sync run done after $((SECONDS - started)) s"
  # the backend fuzzed against a real NetBox (it writes what it likes there: a NetBox of its own, the
  # long-sync instance's slot, free again once that run's fixtures have stopped it)
  env -u HVSYNC_NETBOX_ENV HVSYNC_E2E_NETBOX=long-sync HVSYNC_E2E_NETBOX_PORT=8769 \
    .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS tests/e2e/test_backend_fuzz.py || ran=$?
  echo "== backend fuzz run done after $((SECONDS - started)) s"
  env -u HVSYNC_NETBOX_ENV .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS tests/e2e/test_demo_signals.py || ran=$?
  echo "== demo signal run done after $((SECONDS - started)) s"
  exit $ran
) >.netbox/long-sync.log 2>&1 &
long_sync_pid=$!

for suite in tests/e2e tests/orchestration; do
  echo "== $suite"
  # test_long_sync.py, test_backend_fuzz.py and test_demo_signals.py run in the background (above)
  .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS "$suite" --ignore=tests/orchestration/test_long_sync.py \
    --ignore=tests/e2e/test_demo_signals.py --ignore=tests/e2e/test_backend_fuzz.py || status=1
done
# The whole-system suites above write through the plugin's apply path (change sets); the sync suite runs
# again with the backend on REST list writes, the path of a NetBox without the plugin's apply route.
# It runs on its own instance (`e2e-sync`), so it goes in the background, beside the matrix's release
# syncs below on the `test` instance: each alone leaves part of the two cores idle while it waits on
# NetBox, the backend or a worker. Its output follows when it ends.
echo "== tests/e2e on the REST path (HVSYNC_NETBOX_APPLY_PATH=false), beside the release matrix below"
(
  ran=0
  HVSYNC_NETBOX_APPLY_PATH=false .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS tests/e2e \
    --ignore=tests/e2e/test_netbox_writes.py --ignore=tests/e2e/test_demo_signals.py \
    --ignore=tests/e2e/test_backend_fuzz.py --ignore=tests/e2e/test_instance_config.py \
    --ignore=tests/e2e/test_netbox_core_tests.py --ignore=tests/e2e/test_instance_tool.py \
    || ran=$?  # test_netbox_writes sets the path per test itself; the others do not depend on the path
  echo "== REST-path e2e run done after $((SECONDS - started)) s"
  exit $ran
) >.netbox/e2e-rest-path.log 2>&1 &
rest_path_pid=$!

# What the matrix proves on each release: the release and the plugin answer, and a full sync through
# the plugin completes with 13 stages ok and a resync that writes nothing.
RELEASE_TESTS=(tests/orchestration/test_release.py
  "tests/orchestration/test_sync_job.py::test_full_sync_job_runs_every_stage_and_converges")
# The wheel install check is a NetBox 4.7.0 (tools/install_check.py); where the matrix has 4.7.0, that
# release's sync runs there, on the operator's install, instead of also on one our tooling made.
INSTALL_CHECK=""
if [[ " $MATRIX " == *" 4.7.0 "* ]]; then INSTALL_CHECK=4.7.0; fi
if [ -n "$MATRIX" ]; then
  echo "== waiting for the matrix releases' templates ($MATRIX)"
  if ! wait "$templates_pid"; then
    cat .netbox/templates.log
    echo "matrix: a release's template could not be made"
    exit 1
  fi
  # say where each release's template came from: a shared dump, the cache, or a migration
  grep -E "shared dump|restoring|restored in|migrat" .netbox/templates.log || true
  wait "$matrix_tests_pid" || true
  if [ -n "$INSTALL_CHECK" ]; then
    # set up beside the release syncs below (a venv from the registry, migrate, collectstatic: about one
    # core of the two); its sync runs after them
    .venv/bin/python tools/install_check.py up --env-out .netbox/install-check/env >.netbox/install-check.log 2>&1 &
    install_check_pid=$!
  fi
  for v in $MATRIX; do
    echo "== NetBox $v: migrate with the plugin, the plugin's tests in NetBox's venv (run beside the suites above)"
    cat ".netbox/matrix-$v.log"
    if [ -e ".netbox/matrix-$v.failed" ]; then
      echo "NetBox $v: the plugin's in-NetBox tests failed"
      status=1
    fi
  done
  for v in $MATRIX; do
    if [ "$v" = "$INSTALL_CHECK" ]; then
      # one full sync per release: 4.7.0's runs below, in the NetBox an operator set up with the wheel
      continue
    fi
    echo "== NetBox $v: full sync of the demo cluster through the plugin"
    if NETBOX_VERSION=$v "${TOOL[@]}" up --name test --fresh; then
      .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS "${RELEASE_TESTS[@]}" || status=1
    else
      status=1
    fi
    echo "== NetBox $v done after $((SECONDS - started)) s"
  done
  if [ -n "$INSTALL_CHECK" ]; then
    echo "== install: the plugin wheel in a NetBox 4.7.0 set up as an operator does (tools/install_check.py);"
    echo "   NetBox 4.7.0's full sync of the demo cluster through the plugin"
    set_up=0
    wait "$install_check_pid" || set_up=$?
    cat .netbox/install-check.log
    if [ "$set_up" = 0 ]; then
      HVSYNC_NETBOX_ENV="$ROOT/.netbox/install-check/env" .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS \
        "${RELEASE_TESTS[@]}" || status=1
    else
      status=1
    fi
    .venv/bin/python tools/install_check.py stop || true
    install_check_pid=""
  fi
  case " $MATRIX " in
    *" 4.5.8 "*)
      echo "== upgrade: the synced NetBox 4.5.8 database migrated to the default release, then resynced"
      if "${TOOL[@]}" up --name test --upgrade-from 4.5.8; then
        .venv/bin/pytest -p no:cacheprovider $PYTEST_ARGS "${RELEASE_TESTS[@]}" || status=1
      else
        status=1
      fi
      ;;
  esac
fi
show_rest_path
show_long_sync
show_netbox_tests
echo "== make test finished after $((SECONDS - started)) s (status $status)"
exit $status
