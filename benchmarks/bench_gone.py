"""Gone-from-Proxmox benchmark (issue 40): marking 1,000 vanished VMs gone, and applying 1,000 approved
deletion requests.

On the demo stack of tools/demo.py (real NetBox under gunicorn with its RQ worker, the backend) and the
emulator's large scenario with N guests (served from this process, so the benchmark can delete them):
  1. a sync of `devices` and `virtual-machines` through the plugin (the N VMs in NetBox);
  2. the endpoint set to `gone_policy: request-deletion` and `gone_guard_share: 1.0` (the mass-vanish
     guard would otherwise refuse to mark more than 30% at once: every guest vanishing is the point here);
  3. every guest deleted in the emulator, then a `virtual-machines` resync queued through the plugin's
     `sync/schedule/` and followed to completion: queued -> completed is what the user waits for; it
     marks the N VMs gone and raises N deletion requests (the policy's receiver, inside the run);
  4. a second user (view + approve on deletion requests, a token of their own) approves every request
     through the REST action `POST deletion-requests/{id}/approve/`, `--parallel` at a time; each
     approval re-reads Proxmox through the backend and deletes the VM the NetBox way (changelog rows).
Only the VM stages run, so each VM is one request (a full sync would also mark and request its disks,
interfaces and addresses). Writes benchmarks/results/gone.json (other --vms: gone-<N>vms.json) with the
machine's load average beside the figures.

Usage: .venv/bin/python benchmarks/bench_gone.py [--vms 1000] [--instance bench-gone] [--parallel 4]
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
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import demo  # noqa: E402 - the demo stack, started the way `make demo` starts it

RESULTS = REPO / "benchmarks" / "results"
INSTANCE_TOOL = [str(demo.BIN / "python"), str(REPO / "tools" / "netbox_instance.py")]
API = "plugins/hvsync/"


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _seconds(row: dict[str, Any], start: str, end: str) -> float:
    return round((_time(row[end]) - _time(row[start])).total_seconds(), 2)


def wait_for(plugin: demo.Plugin, job_id: int, timeout: float = 3600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = plugin.get(f"core/jobs/{job_id}/")
        if row["status"]["value"] in ("completed", "failed", "errored"):
            return row
        time.sleep(0.5)
    raise SystemExit(f"job {job_id} did not finish within {timeout:g} s")


def sync(plugin: demo.Plugin, *stages: str) -> dict[str, Any]:
    job = wait_for(plugin, plugin.post(API + "sync/schedule/", {"sync_types": list(stages)})["id"])
    if job["status"]["value"] != "completed":
        raise SystemExit(f"sync {stages} ended {job['status']['value']}: {job['error']}")
    return job


def count(plugin: demo.Plugin, path: str) -> int:
    sep = "&" if "?" in path else "?"
    return int(plugin.get(f"{path}{sep}limit=1")["count"])


def stage_summary(job: dict[str, Any], stage: str) -> dict[str, Any]:
    [entry] = [s for s in job["data"]["sync"]["stages"] if s["stage"] == stage]
    return dict(entry["summary"]) | {"backend_duration_ms": entry.get("backend_duration_ms")}


def approver(plugin: demo.Plugin, url: str) -> str:
    """A second user allowed to view and approve deletion requests; their token's header."""
    name, password = "bench-approver", "Approve-" + os.urandom(8).hex()
    user = plugin.post("users/users/", {"username": name, "password": password})
    plugin.post(
        "users/permissions/",
        {
            "name": "approve deletions (bench)",
            "object_types": ["netbox_hvsync.deletionrequest"],
            "actions": ["view", "approve"],
            "users": [user["id"]],
        },
    )
    made = httpx.post(
        url + "/api/users/tokens/provision/", json={"username": name, "password": password}, timeout=60
    )
    made.raise_for_status()
    return f"Bearer nbt_{made.json()['key']}.{made.json()['token']}"


def pending_ids(plugin: demo.Plugin) -> list[int]:
    ids: list[int] = []
    path = f"{API}deletion-requests/?status=pending&brief=1&limit=500&ordering=id"
    while path:
        page = plugin.get(path)
        ids += [row["id"] for row in page["results"]]
        path = page["next"].split("/api/", 1)[1] if page["next"] else ""
    return ids


def approve_all(url: str, header: str, ids: list[int], parallel: int) -> dict[str, Any]:
    """Approve every request through the REST action; each answer is the request after applying."""
    per_request: list[float] = []
    outcome: dict[str, int] = {}

    def one(client: httpx.Client, pk: int) -> str:
        t0 = time.perf_counter()
        r = client.post(f"{API}deletion-requests/{pk}/approve/", json={"comment": "bench: gone for good"})
        per_request.append(time.perf_counter() - t0)
        if r.status_code != 200:
            return f"http {r.status_code}"
        return str(r.json()["status"]["value"])

    with httpx.Client(base_url=url + "/api/", headers={"Authorization": header}, timeout=300) as client:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            for status in pool.map(lambda pk: one(client, pk), ids):
                outcome[status] = outcome.get(status, 0) + 1
        total = time.perf_counter() - t0
    return {
        "requests": len(ids),
        "parallel": parallel,
        "seconds": round(total, 2),
        "per_second": round(len(ids) / total, 1) if total else None,
        "request_ms_median": round(statistics.median(per_request) * 1000, 1) if per_request else None,
        "request_ms_p95": round(sorted(per_request)[int(len(per_request) * 0.95) - 1] * 1000, 1)
        if per_request
        else None,
        "outcome": outcome,
    }


def run(vms: int, instance: str, parallel: int) -> dict[str, Any]:
    from pve_emulator.testing import running_emulator

    with tempfile.TemporaryDirectory(prefix="hvsync-bench-gone-") as state:
        stack = demo.Demo(instance=instance, state=Path(state))
        try:
            netbox = stack.start_netbox()
            with running_emulator("large", vms=vms, tls=True) as emu:
                backend = stack.start_backend()
                plugin = demo.Plugin(netbox)
                demo.configure_plugin(plugin, backend, f"https://127.0.0.1:{emu.port}")
                [hv] = plugin.get(API + "hv-endpoints/")["results"]
                initial = sync(plugin, "devices", "virtual-machines")
                synced = count(plugin, "virtualization/virtual-machines/?tag=hvsync")
                if synced != len(emu.state.guests):
                    raise SystemExit(f"{synced} VMs in NetBox for {len(emu.state.guests)} guests")
                r = plugin.http.patch(
                    f"{API}hv-endpoints/{hv['id']}/",
                    json={"gone_policy": "request-deletion", "gone_guard_share": 1.0},
                )
                r.raise_for_status()

                emu.state.guests.clear()  # every guest deleted in Proxmox
                emu.state.bump()
                load_at_mark = os.getloadavg()
                marked = sync(plugin, "virtual-machines")
                summary = stage_summary(marked, "virtual-machines")
                gone = count(plugin, f"{API}synced-virtual-machines/?gone=true")
                ids = pending_ids(plugin)

                load_at_approve = os.getloadavg()
                applied = approve_all(
                    netbox["NETBOX_URL"], approver(plugin, netbox["NETBOX_URL"]), ids, parallel
                )
                left = count(plugin, "virtualization/virtual-machines/?tag=hvsync")
                applied_rows = count(plugin, f"{API}deletion-requests/?status=applied")
                changelog = count(
                    plugin,
                    "core/object-changes/?changed_object_type=virtualization.virtualmachine&action=delete",
                )
        finally:
            stack.stop()
            subprocess.run([*INSTANCE_TOOL, "forget", "--name", instance], check=False, timeout=120)
    return {
        "vms": synced,
        "initial_sync_s": _seconds(initial, "created", "completed"),
        "mark": {
            "queued_to_done_s": _seconds(marked, "created", "completed"),
            "wait_s": _seconds(marked, "created", "started"),
            "run_s": _seconds(marked, "started", "completed"),
            "stage": summary,
            "gone_records": gone,
            "pending_requests": len(ids),
            "load_average_at_queue": [round(x, 2) for x in load_at_mark],
        },
        "approve": applied
        | {
            "applied_requests": applied_rows,
            "vms_left_in_netbox": left,
            "vm_delete_changelog_rows": changelog,
            "load_average_at_start": [round(x, 2) for x in load_at_approve],
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vms", type=int, default=1000)
    parser.add_argument("--instance", default="bench-gone")
    parser.add_argument("--parallel", type=int, default=4, help="approvals in flight at once")
    args = parser.parse_args()
    load_before = os.getloadavg()
    figures = run(args.vms, args.instance, args.parallel)
    result = {
        "benchmark": "gone",
        "when": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "endpoint": {"gone_policy": "request-deletion", "gone_guard_share": 1.0},
        **figures,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "gone" if args.vms == 1000 else f"gone-{args.vms}vms"
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    mark, approve = figures["mark"], figures["approve"]
    print(f"{figures['vms']} VMs synced (devices + virtual-machines) in {figures['initial_sync_s']} s")
    print(
        f"mark: virtual-machines resync queued -> completed {mark['queued_to_done_s']} s "
        f"(wait {mark['wait_s']} s, run {mark['run_s']} s): gone {mark['stage'].get('gone')}, "
        f"deletion_requests {mark['stage'].get('deletion_requests')}, {mark['pending_requests']} pending"
    )
    print(
        f"approve: {approve['requests']} REST approvals, {approve['parallel']} in flight, "
        f"{approve['seconds']} s ({approve['per_second']}/s, median {approve['request_ms_median']} ms, "
        f"p95 {approve['request_ms_p95']} ms): {approve['outcome']}; {approve['vms_left_in_netbox']} VMs left, "
        f"{approve['vm_delete_changelog_rows']} delete rows in the changelog"
    )
    print(f"load average before {result['load_average_before']}, after {result['load_average_after']}")
    ok = (
        mark["stage"].get("gone") == figures["vms"]
        and mark["pending_requests"] == figures["vms"]
        and approve["outcome"] == {"applied": figures["vms"]}
        and approve["vms_left_in_netbox"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
