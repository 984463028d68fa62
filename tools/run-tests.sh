#!/usr/bin/env bash
# `make test`: every test of the three products, against real parts.
#  - unit and component tests in the workspace venv (emulator, real Proxmox tools against the emulator,
#    backend, plugin core rules), in the foreground;
#  - the plugin's tests inside NetBox's own venv, against a real NetBox database cloned from a cached template;
#  - whole-system tests (emulator + backend + live NetBox with the plugin and an RQ worker): tests/e2e on
#    the apply path and again on the REST path, tests/orchestration, a sync longer than NetBox's default
#    job timeout, the fault matrix, the backend fuzzed against a real NetBox, `make demo`'s signals;
#  - the NetBox release matrix: on every other supported release the plugin migrates, its in-NetBox tests
#    pass (the modules about the plugin's own protocol, marked release_agnostic, run on the default
#    release only) and a full sync of the demo cluster through the plugin converges; then the synced 4.5.8
#    database is upgraded to the default release and a resync writes nothing. 4.7.0's sync runs in the
#    plugin's wheel installed into a NetBox 4.7.0 set up as an operator does (not by our tooling);
#  - NetBox's own tests with hvsync installed and without (tools/netbox_core_tests.py).
# NETBOX_VERSION=<release> runs the suites on that release instead of the default (4.7.3) and skips the
# matrix; HVSYNC_NETBOX_MATRIX="4.6.8" narrows the matrix ("" turns it off).
#
# How it fits in the time: the machine has two cores, and most of these suites wait on a NetBox, a
# worker or a backend they started. Every NetBox instance has its own port and Redis databases, so the
# suites run in lanes, one per Redis slot, all started at once; each lane runs its suites one after the
# other and writes its output to .netbox/lane-<name>.log, shown (in a fixed order) when it ends; the
# matrix releases' in-NetBox suites go to whichever lanes are free first. The machine's CPU use is
# sampled meanwhile (.netbox/cpu.log; a summary at the end): a run that keeps both cores busy to its
# end is as short as its work allows.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTEST_ARGS=${PYTEST_ARGS:-}
TOOL=(.venv/bin/python tools/netbox_instance.py)
PYTEST=(.venv/bin/pytest -p no:cacheprovider)
status=0
started=$SECONDS

if [ -z "${NETBOX_VERSION:-}" ]; then
  MATRIX=${HVSYNC_NETBOX_MATRIX-4.5.8 4.6.8 4.7.0}
else
  MATRIX=""
fi
# The wheel install check is a NetBox 4.7.0 (tools/install_check.py); where the matrix has 4.7.0, that
# release's sync runs there, on the operator's install, instead of also on one our tooling made.
INSTALL_CHECK=""
if [[ " $MATRIX " == *" 4.7.0 "* ]]; then INSTALL_CHECK=4.7.0; fi
# What the matrix proves on each release: the release and the plugin answer, and a full sync through
# the plugin completes with 13 stages ok and a resync that writes nothing.
RELEASE_TESTS=(tests/orchestration/test_release.py
  "tests/orchestration/test_sync_job.py::test_full_sync_job_runs_every_stage_and_converges")
REST_FUZZ=packages/netbox-hvsync/tests/netbox/test_rest_fuzz.py
# a short stage-stream read timeout (the plugin's default is 120 s) keeps the timeout fault tests quick
export HVSYNC_STREAM_READ_TIMEOUT=45

mkdir -p .netbox
rm -f .netbox/lane-*.log
rm -rf .netbox/matrix-claims
mkdir -p .netbox/matrix-claims
bash tools/cpu-sampler.sh >.netbox/cpu.log 2>&1 &
sampler_pid=$!

# Every release's venv and migrated template database is made in the background from the start, the
# default release's first; everything that needs a release's template waits on its lock.
(for v in "${NETBOX_VERSION:-}" $MATRIX; do NETBOX_VERSION=$v "${TOOL[@]}" template || exit 1; done) \
  >.netbox/templates.log 2>&1 &
templates_pid=$!

declare -A LANE_PID=()
LANES=()
# lane NAME FUNCTION: FUNCTION in the background, its output in .netbox/lane-NAME.log
lane() {
  local name=$1
  shift
  ("$@") >".netbox/lane-$name.log" 2>&1 &
  LANE_PID[$name]=$!
  LANES+=("$name")
}
# show_lane NAME: wait for a lane, show its output, count its failure
show_lane() {
  local name=$1 ran=0
  if [ -z "${LANE_PID[$name]:-}" ]; then return; fi
  if kill -0 "${LANE_PID[$name]}" 2>/dev/null; then echo "== waiting for lane $name"; fi
  wait "${LANE_PID[$name]}" || ran=$?
  unset "LANE_PID[$name]"
  echo "== lane $name: its output (.netbox/lane-$name.log)"
  cat ".netbox/lane-$name.log"
  if [ "$ran" != 0 ]; then
    echo "== lane $name FAILED"
    status=1
  fi
}
done_after() { echo "== $1 done after $((SECONDS - started)) s"; }

# Lane `test` (the `test` instance's Redis): the plugin's tests in NetBox's venv on the default release,
# then tests/e2e on the apply path (change sets) against a `test` instance its fixtures start and stop.
lane_test() {
  local ran=0
  "${TOOL[@]}" down --name test >/dev/null
  HVSYNC_PYTEST_REDIS_OF=test "${TOOL[@]}" pytest $PYTEST_ARGS packages/netbox-hvsync/tests/netbox \
    --ignore="$REST_FUZZ" || ran=1
  done_after "the plugin's tests in NetBox's venv (NetBox ${NETBOX_VERSION:-default})"
  # test_backend_fuzz, test_demo_signals run in other lanes
  HVSYNC_E2E_NETBOX=test HVSYNC_E2E_NETBOX_PORT=8766 "${PYTEST[@]}" $PYTEST_ARGS tests/e2e \
    --ignore=tests/e2e/test_demo_signals.py --ignore=tests/e2e/test_backend_fuzz.py || ran=1
  done_after "tests/e2e (apply path)"
  return $ran
}

# Lane `demo` (the `demo` instance's Redis): the plugin's REST fuzz run (minutes, one release: the
# plugin's input handling is the same on all), the release matrix's syncs and the upgrade on the `demo`
# instance, then `make demo`'s signal handling (the real launcher, three starts of it, on the same slot).
lane_demo() {
  local ran=0 v
  "${TOOL[@]}" down --name demo >/dev/null
  HVSYNC_PYTEST_REDIS_OF=demo "${TOOL[@]}" pytest $PYTEST_ARGS "$REST_FUZZ" || ran=1
  done_after "$REST_FUZZ"
  for v in $MATRIX; do
    if [ "$v" = "$INSTALL_CHECK" ]; then continue; fi  # its sync runs in lane `install`
    echo "== NetBox $v: full sync of the demo cluster through the plugin"
    if NETBOX_VERSION=$v "${TOOL[@]}" up --name demo --fresh; then
      HVSYNC_NETBOX_ENV="$ROOT/.netbox/instances/demo/env" "${PYTEST[@]}" $PYTEST_ARGS "${RELEASE_TESTS[@]}" \
        || ran=1
    else
      ran=1
    fi
    done_after "NetBox $v's sync"
  done
  if [[ " $MATRIX " == *" 4.5.8 "* ]]; then
    echo "== upgrade: the synced NetBox 4.5.8 database migrated to the default release, then resynced"
    if "${TOOL[@]}" up --name demo --upgrade-from 4.5.8; then
      HVSYNC_NETBOX_ENV="$ROOT/.netbox/instances/demo/env" "${PYTEST[@]}" $PYTEST_ARGS "${RELEASE_TESTS[@]}" \
        || ran=1
    else
      ran=1
    fi
    done_after "the upgrade"
  fi
  "${TOOL[@]}" down --name demo
  "${PYTEST[@]}" $PYTEST_ARGS tests/e2e/test_demo_signals.py || ran=1
  done_after "make demo's signal test"
  return $ran
}

# Lane `long-sync` (bench's Redis; `make bench` never runs beside `make test`): a sync that outlasts
# NetBox's default 300 s RQ job timeout (the emulator slowed down; the plugin's own job timeout), then
# the backend fuzzed against a real NetBox (it writes what it likes there: a NetBox of its own), then the
# fault matrix (hvsync on the emulator's faults on demand), each on a `long-sync` instance of its own;
# then any matrix release's in-NetBox tests no lane has claimed yet.
lane_long_sync() {
  local ran=0
  HVSYNC_ORCH_INSTANCE=long-sync "${PYTEST[@]}" $PYTEST_ARGS tests/orchestration/test_long_sync.py || ran=1
  done_after "the long sync"
  HVSYNC_E2E_NETBOX=long-sync HVSYNC_E2E_NETBOX_PORT=8769 "${PYTEST[@]}" $PYTEST_ARGS \
    tests/e2e/test_backend_fuzz.py || ran=1
  done_after "the backend's fuzz run"
  HVSYNC_ORCH_INSTANCE=long-sync "${PYTEST[@]}" $PYTEST_ARGS tests/orchestration/test_fault_matrix.py || ran=1
  done_after "the fault matrix"
  claim_matrix_releases long-sync || ran=1
  return $ran
}

# Lane `e2e-sync` (a spare Redis slot): the sync suite once more with the backend on REST list writes,
# the path of a NetBox without the plugin's apply route, then tests/orchestration, each on an `e2e-sync`
# instance its fixtures start and stop; then any matrix release's in-NetBox tests not yet claimed.
lane_e2e_sync() {
  local ran=0
  # test_netbox_writes sets the path per test itself; the others skipped here do not depend on the path
  HVSYNC_NETBOX_APPLY_PATH=false "${PYTEST[@]}" $PYTEST_ARGS tests/e2e \
    --ignore=tests/e2e/test_netbox_writes.py --ignore=tests/e2e/test_demo_signals.py \
    --ignore=tests/e2e/test_backend_fuzz.py --ignore=tests/e2e/test_instance_config.py \
    --ignore=tests/e2e/test_netbox_core_tests.py --ignore=tests/e2e/test_instance_tool.py || ran=1
  done_after "tests/e2e (REST path)"
  HVSYNC_ORCH_INSTANCE=e2e-sync "${PYTEST[@]}" $PYTEST_ARGS tests/orchestration \
    --ignore=tests/orchestration/test_long_sync.py --ignore=tests/orchestration/test_fault_matrix.py || ran=1
  done_after "tests/orchestration"
  claim_matrix_releases e2e-sync || ran=1
  return $ran
}

# Lane `install` (a spare Redis slot): the plugin wheel in a NetBox 4.7.0 set up as an operator does
# (tools/install_check.py), and NetBox 4.7.0's full sync of the demo cluster through the plugin there;
# then any matrix release's in-NetBox tests not yet claimed.
lane_install() {
  local ran=0
  if .venv/bin/python tools/install_check.py up --env-out .netbox/install-check/env; then
    HVSYNC_NETBOX_ENV="$ROOT/.netbox/install-check/env" "${PYTEST[@]}" $PYTEST_ARGS "${RELEASE_TESTS[@]}" \
      || ran=1
  else
    ran=1
  fi
  .venv/bin/python tools/install_check.py stop || true
  done_after "the install check"
  claim_matrix_releases install-check || ran=1
  return $ran
}

# The other releases' in-NetBox tests (each clones its own database and starts its own backend on a
# free port), one release per pytest run: each release is claimed (mkdir is atomic) by whichever lane is
# free first, the `matrix` lane from the start and the lanes that end early once their own suites are
# done, each on its own Redis databases (SLOT's, or the pytest runs' own when SLOT is empty).
claim_matrix_releases() {
  local slot=$1 ran=0 v
  for v in $MATRIX; do
    mkdir ".netbox/matrix-claims/$v" 2>/dev/null || continue
    echo "== NetBox $v: migrate with the plugin, the plugin's tests in NetBox's venv (Redis of ${slot:-the pytest runs})"
    env ${slot:+HVSYNC_PYTEST_REDIS_OF=$slot} NETBOX_VERSION=$v "${TOOL[@]}" pytest $PYTEST_ARGS \
      packages/netbox-hvsync/tests/netbox --ignore="$REST_FUZZ" -m "not release_agnostic" \
      || { echo "NetBox $v: the plugin's in-NetBox tests failed"; ran=1; }
    done_after "NetBox $v's in-NetBox tests"
  done
  return $ran
}

# Lane `matrix` (the Redis databases of the pytest runs): matrix releases' in-NetBox tests, as claimed.
lane_matrix() {
  claim_matrix_releases ""
}

# Lane `netbox-own`: NetBox's own tests, with hvsync installed and without (the whole virtualization app,
# dcim's and ipam's test_missing_filters, on clones of the templates): a test that fails only with hvsync
# fails the run. It shares the pytest runs' Redis databases (its tests use NetBox's cache only).
lane_netbox_own() {
  .venv/bin/python tools/netbox_core_tests.py
}

on_exit() {
  local name
  for name in "${LANES[@]}"; do show_lane "$name"; done
  "${TOOL[@]}" down --name demo >/dev/null 2>&1 || true
  if [ -n "$INSTALL_CHECK" ]; then .venv/bin/python tools/install_check.py stop >/dev/null 2>&1 || true; fi
  kill "$sampler_pid" 2>/dev/null || true
}
trap on_exit EXIT

lane test lane_test
lane demo lane_demo
lane long-sync lane_long_sync
lane e2e-sync lane_e2e_sync
if [ -n "$INSTALL_CHECK" ]; then lane install lane_install; fi
if [ -n "$MATRIX" ]; then lane matrix lane_matrix; fi
lane netbox-own lane_netbox_own

# the browser tests (emulator docs offline, the plugin's sync-run page) drive Debian's chromium
bash tools/ensure-chromium.sh

# One pytest process per suite: each suite has its own conftest.py and fixtures.
# tests/tools: real Proxmox clients (prometheus-pve-exporter, Ansible's community.proxmox, proxmoxer) from
# a venv of their own, run unchanged against emulator processes
for suite in packages/pve-emulator/tests tests/tools packages/hvsync-backend/tests packages/netbox-hvsync/tests/rules; do
  echo "== $suite"
  "${PYTEST[@]}" $PYTEST_ARGS "$suite" || status=1
done
done_after "the unit and component suites"

if ! wait "$templates_pid"; then
  cat .netbox/templates.log
  echo "a release's template could not be made"
  status=1
fi
# say where each release's template came from: a shared dump, the cache, or a migration
grep -E "shared dump|restoring|restored in|migrat" .netbox/templates.log || true

for name in "${LANES[@]}"; do show_lane "$name"; done
kill "$sampler_pid" 2>/dev/null || true
echo "== the machine's CPU use, per minute (% of both cores; .netbox/cpu.log has every 20 s)"
awk '{m=int($1/60); s[m]+=$3; n[m]++} END {for (i=0; i in n; i++) printf "%d%s", s[i]/n[i], (i%15==14 ? "\n" : " "); print ""}' \
  .netbox/cpu.log || true
echo "== make test finished after $((SECONDS - started)) s (status $status)"
exit $status
