"""Queue-wait benchmark: how long a sync waits to start right after a big write, on hvsync's own RQ queue
and on NetBox's `default` queue.

NetBox 4.7 indexes each committed transaction for its global search in a "Search cache update" job on
`default`; a sync that writes a few hundred objects over REST leaves a few hundred of them. In one run,
twice on a fresh NetBox (the demo stack of tools/demo.py: real NetBox under gunicorn with one RQ worker
serving `netbox_hvsync.sync high default low`, the backend, the emulator's demo cluster):
  1. the initial sync, queued through the plugin and followed to completion;
  2. right after it, a no-change resync queued on hvsync's queue (the plugin's REST `sync/schedule/`) or,
     in the second round, on `default` (`SyncJob.enqueue(queue_name="default")` in NetBox's shell);
  3. the resync's wait (job `started` - `created`), run time and the queue backlog when it was queued;
  4. the backend's resident memory after the initial sync and after the resyncs (whose job reads it keeps
     a minute), and its peak.
Target: on hvsync's queue the resync starts within 2 s. Writes benchmarks/results/queue_wait.json and
queue_wait.png.

With `--vms N` the emulator serves the large scenario with N guests instead of the demo cluster (the
issue's case: a sync queued right after a 1,000-VM initial sync); results go to queue_wait-<N>vms.json.
On hvsync's queue, `--again N` (default 2) more resyncs are then queued one after the other, once the
default queue's backlog has had time to shrink: what a user waits for at a quieter moment (the median
of all the round's resyncs is reported). `--queues own` skips the round on `default`.

Usage: .venv/bin/python benchmarks/bench_queue_wait.py [--instance bench-queue] [--vms 1000] [--again 2]
           [--queues own]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import demo  # noqa: E402 - the demo stack, started the way `make demo` starts it

RESULTS = REPO / "benchmarks" / "results"
OWN, DEFAULT = "netbox_hvsync.sync", "default"
TARGET_WAIT_S = 2.0
INSTANCE_TOOL = [str(demo.BIN / "python"), str(REPO / "tools" / "netbox_instance.py")]
ENQUEUE_ON_DEFAULT = (
    "from netbox_hvsync.jobs import SyncJob, build_sync_block;"
    "from users.models import User;"
    "job = SyncJob.enqueue(sync=build_sync_block(), queue_name='default', user=User.objects.get(username='admin'));"
    "print('JOB', job.pk)"
)


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _seconds(row: dict[str, Any], start: str, end: str) -> float:
    return round((_time(row[end]) - _time(row[start])).total_seconds(), 2)


def queue_on_default(instance: str) -> int:
    """Queue a full resync on `default` from NetBox's shell (the plugin itself never does while its own
    queue is served) and return the job's id."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(
        [*INSTANCE_TOOL, "manage", "--name", instance, "shell", "-c", ENQUEUE_ON_DEFAULT],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    return int(next(line for line in out.stdout.splitlines() if line.startswith("JOB ")).split()[1])


def memory_mb(pid: int) -> dict[str, float]:
    """A process's resident memory now and at its peak (Linux /proc), in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return {key: round(int(fields[key].split()[0]) / 1024, 1) for key in ("VmRSS", "VmHWM")}


def wait_for(plugin: demo.Plugin, job_id: int, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = plugin.get(f"core/jobs/{job_id}/")
        if row["status"]["value"] in ("completed", "failed", "errored"):
            return row
        time.sleep(0.5)
    raise SystemExit(f"job {job_id} did not finish within {timeout:g} s")


def one_round(queue: str, instance: str, vms: int | None = None, again: int = 0) -> dict[str, Any]:
    """A fresh stack, the initial sync, then the resync on `queue` (and `again` more, one by one)."""
    with tempfile.TemporaryDirectory(prefix="hvsync-bench-queue-") as state:
        stack = demo.Demo(instance=instance, state=Path(state))
        try:
            netbox = stack.start_netbox()
            emulator = stack.start_emulator(vms)
            backend = stack.start_backend()
            plugin = demo.Plugin(netbox)
            demo.configure_plugin(plugin, backend, emulator)
            initial = demo.run_sync_job(plugin)
            backend_pid = stack.children["backend"].pid
            memory_after_initial = memory_mb(backend_pid)
            backlog = {q["name"]: q.get("jobs") for q in plugin.get("core/background-queues/")["results"]}
            if queue == OWN:
                job_id = plugin.post("plugins/hvsync/sync/schedule/", {})["id"]
            else:
                job_id = queue_on_default(instance)
            resync = wait_for(plugin, job_id, timeout=3600)
            later = [
                wait_for(plugin, plugin.post("plugins/hvsync/sync/schedule/", {})["id"], timeout=3600)
                for _ in range(again)
            ]
            # the resyncs' job reads (Proxmox answers, NetBox lists) are still kept a minute after a job
            memory_after_resyncs = memory_mb(backend_pid)
        finally:
            stack.stop()
            # give back the instance's Redis databases and database (the instance tool has 16 slots)
            subprocess.run([*INSTANCE_TOOL, "forget", "--name", instance], check=False, timeout=120)
    return {
        "queue": queue,
        "ran_on": resync.get("queue_name"),
        "status": resync["status"]["value"],
        "initial_sync_s": _seconds(initial, "started", "completed"),
        "backlog_at_enqueue": backlog,
        "wait_s": _seconds(resync, "created", "started"),
        "run_s": _seconds(resync, "started", "completed"),
        "queued_to_done_s": _seconds(resync, "created", "completed"),
        "resync_ms": steps_ms(resync),
        "resync_backend_ms": steps_ms(resync, "backend_duration_ms"),
        "backend_memory_mib": {"after_initial": memory_after_initial, "after_resyncs": memory_after_resyncs},
        "later_resyncs": [
            {
                "status": job["status"]["value"],
                "wait_s": _seconds(job, "created", "started"),
                "queued_to_done_s": _seconds(job, "created", "completed"),
                "resync_ms": steps_ms(job),
            }
            for job in later
        ],
    }


def steps_ms(job: dict[str, Any], stage_field: str = "duration_ms") -> dict[str, int]:
    """Where a sync job's run time went, from its `data["sync"]` record: the preflight, each stage stream
    (as the plugin timed it, or with `stage_field="backend_duration_ms"` the backend's run inside it) and
    the plugin's local reconciliation."""
    block = (job.get("data") or {}).get("sync") or {}
    spent = {"preflight": (block.get("preflight") or {}).get("duration_ms")}
    spent.update({str(entry.get("stage")): entry.get(stage_field) for entry in block.get("stages") or []})
    spent["reconciliation"] = (block.get("reconciliation") or {}).get("duration_ms")
    return {name: int(ms) for name, ms in spent.items() if isinstance(ms, int | float)}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = result["rounds"]
    labels = [f"{r['queue']}\n({r['backlog_at_enqueue'].get('default', 0)} jobs on default)" for r in rounds]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(labels, [r["wait_s"] for r in rounds], label="wait in queue")
    ax.bar(labels, [r["run_s"] for r in rounds], bottom=[r["wait_s"] for r in rounds], label="run")
    ax.axhline(
        TARGET_WAIT_S, color="grey", linestyle="--", linewidth=1, label=f"wait target {TARGET_WAIT_S:g} s"
    )
    ax.set_ylabel("seconds from queued")
    guests = result.get("guests", "demo cluster")
    ax.set_title(
        f"No-change resync queued right after the initial sync ({guests}{' VMs' if guests != 'demo cluster' else ''})"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--instance", default="bench-queue")
    parser.add_argument("--vms", type=int, default=None, help="guests of the large scenario (default: demo)")
    parser.add_argument("--again", type=int, default=2, help="further resyncs on hvsync's queue")
    parser.add_argument("--queues", choices=("both", "own"), default="both")
    args = parser.parse_args()
    load_before = os.getloadavg()
    queues = (OWN, DEFAULT) if args.queues == "both" else (OWN,)
    rounds = [one_round(q, args.instance, args.vms, args.again if q == OWN else 0) for q in queues]
    own = rounds[0]
    waited = [own["queued_to_done_s"], *(r["queued_to_done_s"] for r in own["later_resyncs"])]
    result = {
        "benchmark": "queue_wait",
        "when": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "guests": args.vms or "demo cluster",
        "rounds": rounds,
        "target_wait_s": TARGET_WAIT_S,
        "own_queue_meets_target": own["ran_on"] == OWN and own["wait_s"] < TARGET_WAIT_S,
        "own_queue_resyncs_queued_to_done_s": waited,
        "own_queue_resync_median_s": statistics.median(waited),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"queue_wait-{args.vms}vms" if args.vms else "queue_wait"
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / f"{stem}.png")
    for r in rounds:
        print(
            f"{r['queue']:<20} ran on {r['ran_on']:<20} wait {r['wait_s']:6.2f} s  run {r['run_s']:6.2f} s  "
            f"({r['backlog_at_enqueue'].get('default', 0)} jobs on default when queued)"
        )
        print("  resync ms:", ", ".join(f"{name} {ms}" for name, ms in r["resync_ms"].items()))
        print("  backend ms:", ", ".join(f"{name} {ms}" for name, ms in r["resync_backend_ms"].items()))
        print("  backend memory (MiB, now and peak):", r["backend_memory_mib"])
    print(
        f"resyncs on hvsync's queue, queued to done (s): {waited}; median {result['own_queue_resync_median_s']}"
    )
    print(f"load average before {result['load_average_before']}, after {result['load_average_after']}")
    ok = result["own_queue_meets_target"] and all(
        r["status"] == "completed" and all(later["status"] == "completed" for later in r["later_resyncs"])
        for r in rounds
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
