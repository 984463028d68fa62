"""Write-path benchmark: the initial sync through the plugin's apply path (change sets) against REST list
writes, at 200, 1,000 and 5,000 VMs (2 NICs, 2 disks, 1 IP each), on fresh NetBox instances under gunicorn.

Each configuration is one run of benchmarks/bench_sync.py (NetBox's REST bulk-write rate, the initial
sync, changelog rows and search-index rows once NetBox's search jobs drained, a no-change resync, a
one-VM change) and keeps its own sync*.json/png. This script runs them in one go and writes
benchmarks/results/write_paths.json and write_paths.png: wall time against VM count for both paths.
All six runs take about 80 minutes on 2 cores; REST at 5,000 VMs alone about 40.

Targets (issue 13): apply path >= 10x faster than REST at 1,000 VMs with equal changelog rows and
search hits; no-change resync of 1,000 VMs under 5 s with zero writes; one-VM change under 1 s.

Usage: .venv/bin/python benchmarks/bench_write_paths.py [--runs rest:200,apply:200,rest:1000,apply:1000,apply:5000,rest:5000]
       [--earlier path:vms,...]  (rows read from an earlier run's sync*.json instead of run again)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_sync

RESULTS = bench_sync.RESULTS
DEFAULT_RUNS = "rest:200,apply:200,rest:1000,apply:1000,apply:5000,rest:5000"


def run_one(path: str, vms: int) -> dict[str, Any]:
    args = argparse.Namespace(
        vms=vms,
        path=path,
        baseline_vms=100,
        instance="bench-paths",
        port=8793,
        emulator="process",
        keep_netbox=False,
        reuse=False,
    )
    try:
        result = asyncio.run(bench_sync.bench(args))
    finally:
        bench_sync.netbox_down(args.instance)
    bench_sync.result_path(vms, "json", path).write_text(json.dumps(result, indent=2) + "\n")
    bench_sync.plot(result, bench_sync.result_path(vms, "png", path))
    return result


def summary(result: dict[str, Any]) -> dict[str, Any]:
    initial = result["initial_sync"]
    return {
        "path": result["write_path"],
        "vms": result["vms"],
        "initial_ok": initial["ok"],
        "initial_errors": len(initial.get("errors") or []),
        "initial_seconds": initial["seconds"],
        "objects_written": initial["objects_written"],
        "objects_per_second": round(initial["objects_written"] / initial["seconds"], 1),
        "netbox_rest_floor_seconds": initial["netbox_floor_seconds"],
        "netbox_rest_objects_per_second": result["netbox_bulk_write"]["objects_per_second"],
        "seen_by_users": initial.get("seen_by_users"),
        "no_change_resync_seconds": result["no_change_resync"]["seconds"],
        "no_change_resync_writes": result["no_change_resync"]["objects_written"],
        "one_vm_change_seconds": result["one_vm_change"]["seconds"],
        "one_vm_change_writes": result["one_vm_change"]["objects_written"],
        "load_average_at_end": result["load_average_at_end"],
    }


def plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for path, colour in (("rest", "#9e9e9e"), ("apply", "#2196f3")):
        mine = sorted((r for r in rows if r["path"] == path), key=lambda r: r["vms"])
        for axis, measure in ((left, "initial_seconds"), (right, "objects_per_second")):
            if mine:
                axis.plot(
                    [r["vms"] for r in mine],
                    [r[measure] for r in mine],
                    "o-",
                    color=colour,
                    label=f"{path} path",
                )
    left.set_xlabel("VMs")
    left.set_ylabel("initial sync, seconds")
    left.set_title("Initial sync wall time (measured points only)", fontsize=9)
    right.set_xlabel("VMs")
    right.set_ylabel("objects written per second")
    right.set_title("Write rate", fontsize=9)
    for ax in (left, right):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", default=DEFAULT_RUNS, help="path:vms pairs, comma-separated")
    parser.add_argument(
        "--earlier",
        default="",
        help="path:vms pairs not run again: their numbers are read from the results of an earlier run",
    )
    args = parser.parse_args()
    rows = []
    for item in filter(None, args.earlier.split(",")):
        path, vms = item.split(":")
        earlier = json.loads(bench_sync.result_path(int(vms), "json", path).read_text())
        rows.append({**summary(earlier), "from_earlier_run": True})
    for item in filter(None, args.runs.split(",")):
        path, vms = item.split(":")
        print(f"== {path} path, {vms} VMs", flush=True)
        rows.append(summary(run_one(path, int(vms))))
        print(json.dumps(rows[-1]), flush=True)
    by = {(r["path"], r["vms"]): r for r in rows}
    speedups = {
        str(vms): round(by[("rest", vms)]["initial_seconds"] / by[("apply", vms)]["initial_seconds"], 2)
        for (path, vms) in by
        if path == "apply" and ("rest", vms) in by
    }
    result = {
        "benchmark": "write_paths",
        "runs": rows,
        "apply_speedup_over_rest": speedups,
        "targets": {"apply_speedup_at_1000": 10, "no_change_1000_seconds": 5, "one_vm_seconds": 1},
        "load_average_at_end": list(os.getloadavg()),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "write_paths.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(rows, RESULTS / "write_paths.png")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
