"""Apply-path profile: what one object costs inside NetBox, per kind, and where that time goes.

The write-path benchmark (bench_write_paths.py) measures whole syncs; this one looks inside the plugin's
`change-sets/` route. On a fresh NetBox (tools/netbox_instance.py), benchmarks/apply_profile_inside.py
runs in `netbox shell` and posts what an initial sync of N guests writes (VMs, their sidecars, NICs with
MACs, disks, IPs, primary IPs), three times on separate guests: timed alone, with SQL queries captured,
and under cProfile. It also times, on the objects the first phase wrote, the work any write path keeps
when it keeps validation and the changelog (the model's `clean`, its unique constraints, one changelog
snapshot), without request handling or save but with NetBox's request cache: the floor of a faster
writer. Last, a bulk probe writes 1,000 more guests the way a bulk writer keeping those guarantees would
(bulk inserts, one changelog row per change, tags, search index, counters), and 1,000 more in bulk but
sending each object's save signals so every receiver runs, and 1,000 more the same way but with each
object's tags written before its save signal (one changelog write per create, not two), and 1,000 more
keeping every receiver but NetBox's changelog one, whose rows it writes in bulk, so that writer's speed
is measured, not estimated. It prints milliseconds and queries per object per kind, that floor,
the probes' times (with the signals' time split by receiver, so it says whose work it is), and writes
benchmarks/results/apply_profile.json and .png (with the most expensive functions per kind and the
tables the queries touch), so the per-object figures docs/sync.md gives can be printed again.

Usage: .venv/bin/python benchmarks/bench_apply_profile.py [--guests 200] [--probe-guests 1000]
       [--instance bench-profile]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
INSIDE = REPO / "benchmarks" / "apply_profile_inside.py"
INSTANCE_TOOL = [sys.executable, str(REPO / "tools" / "netbox_instance.py")]


def plot(result: dict[str, object], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = result["stages"]
    assert isinstance(stages, list)
    kinds = [row["kind"].replace(" ", "\n", 1) for row in stages]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.bar(kinds, [row["ms_per_object"] for row in stages], color="#2196f3", label="whole apply")
    left.bar(
        kinds,
        [row["kept_work"]["clean_ms"] + row["kept_work"]["changelog_ms"] for row in stages],
        color="#0d47a1",
        label="of which kept work alone (clean + changelog snapshot)",
    )
    left.legend(fontsize=7)
    left.set_ylabel("milliseconds per object")
    left.set_title(
        f"Apply path, NetBox {result['netbox']}: {result['objects_per_second']} objects/s overall", fontsize=9
    )
    right.bar(kinds, [row["queries_per_object"] for row in stages], color="#9e9e9e")
    right.set_ylabel("SQL queries per object")
    right.set_title(f"Queries per object ({result['guests']} guests per phase)", fontsize=9)
    for axis in (left, right):
        axis.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def rest_sync_seconds(vms: int) -> float | None:
    """The REST path's initial sync of `vms` VMs in the write-path benchmark's last results, if any."""
    try:
        runs = json.loads((RESULTS / "write_paths.json").read_text())["runs"]
    except (OSError, ValueError, KeyError):
        return None
    return next((r["initial_seconds"] for r in runs if r["path"] == "rest" and r["vms"] == vms), None)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--guests", type=int, default=200)
    parser.add_argument("--probe-guests", type=int, default=1000, help="guests the bulk probe writes")
    parser.add_argument("--instance", default="bench-profile")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "profile.json"
        env.update(
            HVSYNC_PROFILE_VMS=str(args.guests),
            HVSYNC_PROBE_VMS=str(args.probe_guests),
            HVSYNC_PROFILE_OUT=str(out),
        )
        try:
            subprocess.run([*INSTANCE_TOOL, "up", "--name", args.instance, "--fresh"], check=True, env=env)
            command = f"import runpy; runpy.run_path({str(INSIDE)!r}, run_name='hvsync_apply_profile')"
            subprocess.run(
                [*INSTANCE_TOOL, "manage", "--name", args.instance, "shell", "--command", command],
                check=True,
                env=env,
            )
        finally:
            subprocess.run([*INSTANCE_TOOL, "forget", "--name", args.instance], check=False, timeout=120)
        result = json.loads(out.read_text())
    result = {
        "benchmark": "apply_profile",
        "netbox": os.environ.get("NETBOX_VERSION", "4.7.3"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        **result,
        "load_average_at_end": list(os.getloadavg()),
    }
    floor = result["kept_work_floor"]
    rest_1000 = rest_sync_seconds(1000)
    if rest_1000 is not None:
        floor["ten_times_rest_seconds_for_1000_guests"] = round(rest_1000 / 10, 1)
        print(
            f"10x the REST path's 1,000-VM initial sync (write_paths.json: {rest_1000} s) is"
            f" {rest_1000 / 10:.1f} s; validation and one changelog snapshot alone take"
            f" {floor['seconds_for_1000_guests']} s of it on {floor['cpus']} CPUs"
        )
    # Both per-guest figures come from this run, on this machine: their ratio holds where seconds do not
    # (write_paths.json's REST run may come from another day or machine).
    for probe in (value for key, value in result.items() if key.startswith("bulk_probe")):
        what = probe["label"]  # apply_profile_inside.PROBES names them
        probe["times_faster_than_change_sets"] = round(floor["apply_ms_per_guest"] / probe["ms_per_guest"], 1)
        print(
            f"one guest on one stream, both in this run: {probe['ms_per_guest']} ms written {what} (probe),"
            f" {floor['apply_ms_per_guest']} ms through change-sets/: {probe['times_faster_than_change_sets']}x"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "apply_profile.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "apply_profile.png")
    print(f"wrote {RESULTS / 'apply_profile.json'} and apply_profile.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
