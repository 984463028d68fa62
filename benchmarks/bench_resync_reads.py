"""Read-path benchmark: a no-change resync of N VMs reading NetBox through the plugin's rows route
(`rows/<path>/`, flat related objects) against the same resync reading NetBox's REST lists.

A no-change resync writes nothing: it is Proxmox reads, NetBox reads and the comparison. With the apply
path offered, the backend reads every path the plugin serves as flat rows; with the apply path turned off
(`HVSYNC_NETBOX_APPLY_PATH=false`, here `NetBoxConfig.apply_path=False`) it reads the REST lists. Both
resyncs run on one NetBox holding one initial sync (through the apply path), alternating rows and REST
so a slower minute of the machine hits both alike; each is reported by its median over the rounds, with
the NetBox read time per route (`netbox_read_seconds_by_path`) beside it.

Then, on the same NetBox, benchmarks/rows_filters_inside.py (in NetBox's shell) times what building a
route's filterset costs for three reads of a one-VM change (devices by tag, the site by slug, a VM by key
prefix): the whole filterset, as REST builds it, against the filters the query names, as the rows route
builds them (`filterset_ms` in the JSON).

Writes benchmarks/results/resync_reads.json and resync_reads.png (other --vms: resync_reads-<N>vms.*).

Usage: .venv/bin/python benchmarks/bench_resync_reads.py [--vms 1000] [--rounds 3] [--instance bench-reads]
       [--port 8795] [--keep-netbox]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_sync
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.wire.change_sets import ROWS_ROUTE

RESULTS = bench_sync.RESULTS
ROWS_PREFIX = f"{ROWS_ROUTE}/"
#: How each resync reads NetBox: the client's apply_path setting behind it
READS = {"rows": True, "rest": False}
INSIDE = Path(__file__).resolve().parent / "rows_filters_inside.py"


def filterset_ms(instance: str) -> dict[str, Any]:
    """The filterset timings of rows_filters_inside.py, run in the NetBox shell of `instance`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "filters.json"
        env["HVSYNC_FILTERS_OUT"] = str(out)
        command = f"import runpy; runpy.run_path({str(INSIDE)!r}, run_name='hvsync_rows_filters')"
        tool = [sys.executable, str(bench_sync.REPO / "tools" / "netbox_instance.py")]
        subprocess.run(
            [*tool, "manage", "--name", instance, "shell", "--no-startup", "--command", command],
            check=True,
            env=env,
            timeout=600,
        )
        found: dict[str, Any] = json.loads(out.read_text())
    for row in found["queries"]:
        if not row["same_rows"]:
            raise SystemExit(f"the narrowed filterset selected other rows than the whole one: {row}")
    return found


def read_seconds(run: dict[str, Any]) -> float:
    """Seconds the resync's requests spent waiting on NetBox reads, all routes together (requests run
    concurrently, so this can exceed the resync's wall time)."""
    return round(sum(row["seconds"] for row in run["netbox_read_seconds_by_path"].values()), 2)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    median = bench_sync.median_run(runs)
    return {
        "seconds": median["seconds"],
        "runs_seconds": median["runs_seconds"],
        "objects_written": median["objects_written"],
        "runs_objects_written": median["runs_objects_written"],
        "read_requests": median["read_requests"],
        "netbox_read_seconds": read_seconds(median),
        "netbox_read_seconds_by_path": median["netbox_read_seconds_by_path"],
        "stage_seconds": median["stage_seconds"],
        "load_average": median["load_average"],
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    config = replace(bench_sync.netbox_up(args.instance, args.port), apply_path=True)
    with bench_sync.emulator("process", args.vms) as emu:
        plugin_pk = await bench_sync.plugin_hv_endpoint(config, emu)
        target = bench_sync.hv_target(emu, plugin_pk)
        client = ProxmoxClient(target)
        try:
            initial = await bench_sync.run_sync(config, HvSource(1, target.name, client), bench_sync.CORE)
            print("initial", initial["seconds"], "s", initial["objects_written"], "objects", flush=True)
            if not initial["ok"]:
                raise SystemExit(f"the initial sync failed: {initial['errors']}")
            runs: dict[str, list[dict[str, Any]]] = {reads: [] for reads in READS}
            for round_ in range(args.rounds):
                order = list(READS.items())  # each route goes first in every other round
                for reads, apply_path in order if round_ % 2 == 0 else order[::-1]:
                    run = await bench_sync.run_sync(
                        replace(config, apply_path=apply_path),
                        HvSource(1, target.name, client),
                        bench_sync.CORE,
                    )
                    print(f"round {round_ + 1} {reads}: {run['seconds']} s", flush=True)
                    runs[reads].append(run)
        finally:
            await client.aclose()
    rows, rest = summary(runs["rows"]), summary(runs["rest"])
    filters = filterset_ms(args.instance)
    for row in filters["queries"]:
        print(
            f"filterset {row['query']}: whole {row['whole_ms']} ms, narrowed {row['narrowed_ms']} ms",
            flush=True,
        )
    return {
        "benchmark": "resync_reads",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "vms": args.vms,
        "rounds": args.rounds,
        "initial_sync": {k: initial[k] for k in ("seconds", "objects_written", "ok")},
        "rows": rows,
        "rest": rest,
        "rest_to_rows": round(rest["seconds"] / rows["seconds"], 2),
        "filterset_ms": filters,
        "target_seconds": 5,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right, filters) = plt.subplots(1, 3, figsize=(15, 4.2))
    names = ["rows route", "REST lists"]
    rows, rest = result["rows"], result["rest"]
    bars = left.bar(names, [rows["seconds"], rest["seconds"]], color=["#2196f3", "#9e9e9e"])
    bench_sync.label_bars(
        left, bars, [f"{run['objects_written']} writes, {run['read_requests']} reads" for run in (rows, rest)]
    )
    left.axhline(result["target_seconds"], color="red", linestyle="--", label="target 5 s")
    left.set_ylabel("seconds (median)")
    left.set_title(f"No-change resync, {result['vms']} VMs ({result['rest_to_rows']}x)", fontsize=9)
    left.legend(fontsize=8)
    by_path = {name: _by_path(run) for name, run in (("rows", rows), ("rest", rest))}
    paths = sorted(by_path["rest"], key=lambda p: -by_path["rest"][p])[:8]
    y = list(range(len(paths)))
    right.barh([i + 0.2 for i in y], [by_path["rest"][p] for p in paths], 0.4, color="#9e9e9e", label="REST")
    right.barh(
        [i - 0.2 for i in y], [by_path["rows"].get(p, 0.0) for p in paths], 0.4, color="#2196f3", label="rows"
    )
    right.set_yticks(y, paths, fontsize=7)
    right.invert_yaxis()
    right.set_xlabel("seconds waiting on NetBox (summed over concurrent requests)")
    right.set_title("NetBox read time by path", fontsize=9)
    right.legend(fontsize=8)
    queries = result["filterset_ms"]["queries"]
    y = list(range(len(queries)))
    labels = [q["query"].split("?")[0] for q in queries]
    filters.barh(
        [i + 0.2 for i in y], [q["whole_ms"] for q in queries], 0.4, color="#9e9e9e", label="whole (REST)"
    )
    filters.barh(
        [i - 0.2 for i in y], [q["narrowed_ms"] for q in queries], 0.4, color="#2196f3", label="narrowed"
    )
    filters.set_yticks(y, labels, fontsize=7)
    filters.invert_yaxis()
    filters.set_xlabel("ms to build, validate and apply the filterset (median)")
    filters.set_title("Filterset per read of a one-VM change", fontsize=9)
    filters.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _by_path(run: dict[str, Any]) -> dict[str, float]:
    """NetBox read seconds per NetBox path, whichever route (REST or rows) served it."""
    seconds: dict[str, float] = {}
    for route, row in run["netbox_read_seconds_by_path"].items():
        path = route.removeprefix(ROWS_PREFIX).strip("/")
        seconds[path] = seconds.get(path, 0.0) + float(row["seconds"])
    return seconds


def result_path(vms: int, suffix: str) -> Path:
    return RESULTS / (f"resync_reads.{suffix}" if vms == 1000 else f"resync_reads-{vms}vms.{suffix}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vms", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--instance", default="bench-reads")
    parser.add_argument("--port", type=int, default=8795)
    parser.add_argument("--keep-netbox", action="store_true", help="leave the NetBox instance running")
    args = parser.parse_args()
    try:
        result = asyncio.run(bench(args))
    finally:
        if not args.keep_netbox:
            bench_sync.netbox_down(args.instance)
    RESULTS.mkdir(parents=True, exist_ok=True)
    result_path(args.vms, "json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, result_path(args.vms, "png"))
    print(json.dumps({k: v for k, v in result.items() if k not in ("rows", "rest")}, indent=2))
    print("rows", result["rows"]["seconds"], "s; REST", result["rest"]["seconds"], "s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
