"""Apply-path profile: what one object costs inside NetBox, per kind, and where that time goes.

The write-path benchmark (bench_write_paths.py) measures whole syncs; this one looks inside the plugin's
`change-sets/` route. On a fresh NetBox (tools/netbox_instance.py), benchmarks/apply_profile_inside.py
runs in `netbox shell` and posts what an initial sync of N guests writes (VMs, their sidecars, NICs with
MACs, disks, IPs, primary IPs), three times on separate guests: timed alone, with SQL queries captured,
and under cProfile. It prints milliseconds and queries per object per kind and writes
benchmarks/results/apply_profile.json and .png (with the most expensive functions per kind and the tables the
queries touch), so the per-object figures docs/sync.md gives can be printed again.

Usage: .venv/bin/python benchmarks/bench_apply_profile.py [--guests 200] [--instance bench-profile]
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
    left.bar(kinds, [row["ms_per_object"] for row in stages], color="#2196f3")
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--guests", type=int, default=200)
    parser.add_argument("--instance", default="bench-profile")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "profile.json"
        env.update(HVSYNC_PROFILE_VMS=str(args.guests), HVSYNC_PROFILE_OUT=str(out))
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
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "apply_profile.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "apply_profile.png")
    print(f"wrote {RESULTS / 'apply_profile.json'} and apply_profile.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
