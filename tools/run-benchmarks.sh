#!/usr/bin/env bash
# `make bench`: every benchmark writes benchmarks/results/<name>.json and <name>.png.
# bench_sync.py runs inside bench_write_paths.py (once per write path and size: 200, 1,000 and 5,000 VMs;
# its REST 1,000-VM run is DESIGN.md's sync target, sync.json), so it is not run a second time here.
# The queue-wait benchmark runs on the demo cluster and after a 1,000-VM initial sync (issue 13's case).
# bench_apply_profile.py prints what one object costs inside NetBox on the apply path, per kind;
# bench_resync_reads.py a 1,000-VM no-change resync reading the plugin's rows route against REST lists.
# bench_proxmox_wire.py what one Proxmox read costs the backend's process on its aiohttp wire and on httpx.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
status=0
for b in benchmarks/bench_*.py; do
  [ -e "$b" ] || continue
  [ "$b" = benchmarks/bench_sync.py ] && continue
  echo "== $b"
  .venv/bin/python "$b" || status=1
done
echo "== benchmarks/bench_queue_wait.py --vms 1000"
.venv/bin/python benchmarks/bench_queue_wait.py --vms 1000 || status=1
exit $status
