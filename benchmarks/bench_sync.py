"""Sync benchmark: pve-emulator `large` scenario -> sync engine -> real NetBox under gunicorn.

Measures, in one run on one fresh NetBox:
  1. NetBox's own bulk-write rate (list POSTs of the same object kinds, same chunking and concurrency);
  2. the initial sync of N VMs (2 NICs, 2 disks, 1 IP each): wall time, objects written, and the ratio
     wall / (objects written / NetBox rate)  (target <= 1.25);
  3. a no-change resync (target < 10 s and zero writes), three times: the median is reported;
  4. a one-VM change synced with the selected-object path (target < 2 s, only that VM's objects), three
     times (the VM's memory grows each time): the median is reported.
Writes benchmarks/results/sync.json and sync.png (other --vms: sync-<N>vms.json/.png).

The sync writes through the plugin's apply path (`--path apply`, change sets) or over REST (`--path rest`);
NetBox's rate in 1. is always REST's. Apply-path runs write sync-apply[-<N>vms].json/.png.

Usage: .venv/bin/python benchmarks/bench_sync.py [--vms 1000] [--path rest|apply] [--instance bench-sync]
       [--port 8792] [--reuse] [--emulator process|inprocess]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from hvsync_backend.endpoints.service import HvTarget
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig
from hvsync_backend.sync.options import SyncOptions
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.sync.registry import BY_SLUG
from hvsync_backend.sync.runner import execute
from pve_emulator.config import DEFAULT_PASSWORD, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET, DEFAULT_USER
from pve_emulator.testing import EmulatorHandle, running_emulator

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "packages" / "hvsync-backend" / "tests"))
from netbox_instance import read_env  # noqa: E402 - the env file's one reader, beside its writer
from stage_harness import emu_target  # noqa: E402 - the emulator as a backend target, as the tests make it

RESULTS = REPO / "benchmarks" / "results"
CORE = [
    "devices",
    "virtual-machines",
    "vm-disks",
    "network-interfaces",
    "vm-interfaces",
    "ip-addresses",
    "sdn",
]
ONE_VM = ["devices", "virtual-machines", "vm-disks", "vm-interfaces", "ip-addresses"]


@contextmanager
def emulator(mode: str, vms: int) -> Iterator[EmulatorHandle]:
    """The `large` scenario, in its own process (as a real Proxmox is: not sharing the backend's CPU
    and GIL) or, with `inprocess`, in a thread of this process (the emulator's test helper)."""
    if mode == "inprocess":
        with running_emulator(scenario="large", vms=vms, response_cache=True) as emu:
            yield emu
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = ["serve", "--scenario", "large", "--vms", str(vms), "--host", "127.0.0.1", "--port", str(port)]
    with tempfile.NamedTemporaryFile("w", prefix="bench-sync-emulator-", suffix=".log", delete=False) as log:
        proc = subprocess.Popen([sys.executable, "-m", "pve_emulator", *command], stdout=log, stderr=log)
        emu = EmulatorHandle(
            host="127.0.0.1",
            port=port,
            scheme="http",
            user=DEFAULT_USER,
            password=DEFAULT_PASSWORD,
            token_id=DEFAULT_TOKEN_ID,
            token_secret=DEFAULT_TOKEN_SECRET,
            verify=False,
            app=None,  # in another process: no live state to inspect
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    httpx.get(
                        f"{emu.api_url}/version",
                        headers={"Authorization": f"PVEAPIToken={emu.token_id}={emu.token_secret}"},
                        timeout=5,
                    ).raise_for_status()
                    break
                except httpx.HTTPError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"pve-emulator did not start; see {log.name}") from None
                    time.sleep(0.3)
            yield emu
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def netbox_database(instance: str) -> str:
    return read_env(REPO / ".netbox" / "instances" / instance / "env")["NETBOX_DB"]


def sql_count(database: str, query: str) -> int:
    answer = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", database, "-Atc", query],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return int(answer.stdout.strip() or 0)


def what_users_see(database: str, since: float, wait: float = 300.0) -> dict[str, Any]:
    """Changelog rows written since `since` (epoch seconds) and search-index rows, once NetBox's search
    jobs have drained (the index count stops moving), plus how long that took. The wait ends after
    `wait` seconds even if indexing goes on: `indexing_finished` says which, and
    `search_jobs_unfinished` how many search jobs were still queued or running then."""
    started = time.monotonic()
    last, stable_since, finished = -1, time.monotonic(), False
    while time.monotonic() - started < wait:
        indexed = sql_count(database, "SELECT count(*) FROM extras_cachedvalue")
        if indexed != last:
            last, stable_since = indexed, time.monotonic()
        elif time.monotonic() - stable_since >= 5:
            finished = True
            break
        time.sleep(1)
    unfinished = sql_count(
        database,
        "SELECT count(*) FROM core_job WHERE name = 'Search cache update' "
        "AND status IN ('pending', 'scheduled', 'running')",
    )
    changes = sql_count(
        database, f"SELECT count(*) FROM core_objectchange WHERE time >= to_timestamp({since})"
    )
    vms_found = sql_count(
        database,
        "SELECT count(DISTINCT object_id) FROM extras_cachedvalue v JOIN django_content_type t "
        "ON t.id = v.object_type_id WHERE t.model = 'virtualmachine' AND v.field = 'name'",
    )
    search_jobs = sql_count(
        database,
        f"SELECT count(*) FROM core_job WHERE name = 'Search cache update' AND created >= to_timestamp({since})",
    )
    return {
        "changelog_rows": changes,
        "search_cache_jobs": search_jobs,
        "search_index_rows": last,
        "vms_in_search_index": vms_found,
        "seconds_until_indexed": round(stable_since - started, 1),
        "indexing_finished": finished and unfinished == 0,
        "search_jobs_unfinished": unfinished,
    }


def netbox_up(instance: str, port: int, fresh: bool = True) -> NetBoxConfig:
    tool = [sys.executable, str(REPO / "tools" / "netbox_instance.py")]
    extra = ["--fresh"] if fresh else []
    subprocess.run([*tool, "up", "--name", instance, *extra, "--port", str(port)], check=True, timeout=3600)
    env = read_env(REPO / ".netbox" / "instances" / instance / "env")
    return NetBoxConfig(url=env["NETBOX_URL"], auth_header=env["NETBOX_AUTH_HEADER"], timeout=120)


def netbox_down(instance: str) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "netbox_instance.py"), "down", "--name", instance], check=False
    )


def label_bars(axes: Any, bars: Any, labels: list[str]) -> None:
    """Write each label just above its bar."""
    for bar, label in zip(bars, labels, strict=True):
        axes.annotate(
            label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=8
        )


async def netbox_write_rate(config: NetBoxConfig, vms: int) -> dict[str, Any]:
    """NetBox's floor: the same object kinds written with the same list requests, no sync logic."""
    async with NetBoxClient(config) as nb:
        [ctype] = await nb.bulk_create(
            "virtualization/cluster-types", [{"name": "baseline", "slug": "baseline"}]
        )
        [cluster] = await nb.bulk_create(
            "virtualization/clusters", [{"name": "baseline", "type": ctype["id"]}]
        )
        started = time.monotonic()
        made = await nb.bulk_create(
            "virtualization/virtual-machines",
            [
                {
                    "name": f"base-{i}",
                    "cluster": cluster["id"],
                    "status": "active",
                    "vcpus": 2,
                    "memory": 2048,
                }
                for i in range(vms)
            ],
        )
        ids = [m["id"] for m in made]
        disks = await nb.bulk_create(
            "virtualization/virtual-disks",
            [{"virtual_machine": v, "name": f"scsi{d}", "size": 10240} for v in ids for d in range(2)],
        )
        ifaces = await nb.bulk_create(
            "virtualization/interfaces",
            [
                {
                    "virtual_machine": v,
                    "name": f"net{n}",
                    "mac_address": f"02:00:{i >> 8 & 255:02X}:{i & 255:02X}:00:{n:02X}",
                }
                for i, v in enumerate(ids)
                for n in range(2)
            ],
        )
        ips = await nb.bulk_create(
            "ipam/ip-addresses",
            [
                {
                    "address": f"172.31.{i >> 8 & 255}.{i & 255}/16",
                    "assigned_object_type": "virtualization.vminterface",
                    "assigned_object_id": ifaces[2 * i]["id"],
                }
                for i in range(vms)
            ],
        )
        objects = len(made) + len(disks) + len(ifaces) + len(ips)
        elapsed = time.monotonic() - started
        await nb.bulk_delete("virtualization/virtual-machines", ids)
        await nb.bulk_delete("ipam/ip-addresses", [ip["id"] for ip in ips if isinstance(ip, dict)])
    return {
        "objects": objects,
        "seconds": round(elapsed, 2),
        "objects_per_second": round(objects / elapsed, 2),
    }


async def plugin_hv_endpoint(config: NetBoxConfig, emu: EmulatorHandle) -> int:
    """The plugin's record of the bench endpoint, as the plugin would push it: with it the stages write
    the plugin's records and every sync-state sidecar, as in production (without it they skip them)."""
    user, token = emu.token_id.split("!")
    async with NetBoxClient(config) as nb:
        found = await nb.list_all("plugins/hvsync/hv-endpoints", params={"name": "bench"}, fields=("id",))
        if found:
            return int(found[0]["id"])
        [row] = await nb.bulk_create(
            "plugins/hvsync/hv-endpoints",
            [
                {
                    "name": "bench",
                    "domain": "localhost",
                    "port": emu.port,
                    "username": user,
                    "access_methods": ["token"],
                    "token_name": token,
                    "token_value": emu.token_secret,
                    "verify_ssl": False,
                    "enabled": False,  # the plugin pushes enabled rows to a backend; there is none here
                }
            ],
        )
        return int(row["id"])


def hv_target(emu: EmulatorHandle, plugin_pk: int) -> HvTarget:
    """The backend's record of the emulator, named for the plugin's record (so sidecars are written)."""
    return emu_target(emu, name=f"bench (inv:{plugin_pk})", timeout=60, retry_backoff=0.5)


async def run_sync(
    config: NetBoxConfig, source: HvSource, stages: list[str], **options: Any
) -> dict[str, Any]:
    async def emit(event: str, data: dict[str, Any]) -> None:
        return None

    async with NetBoxClient(config) as nb:
        started = time.monotonic()
        done = await execute(
            [BY_SLUG[s] for s in stages],
            name="bench",
            netbox=config,
            sources=[source],
            options=SyncOptions(**options),
            emit=emit,
            client=nb,
        )
        wall = time.monotonic() - started
        return {
            "ok": done["ok"],
            "seconds": round(wall, 2),
            "objects_written": nb.stats.objects_written,
            "created": nb.stats.created,
            "updated": nb.stats.updated,
            "deleted": nb.stats.deleted,
            "write_requests": nb.stats.write_requests,
            "read_requests": nb.stats.read_requests,
            "cached_reads": getattr(nb.stats, "cached_reads", None),
            "netbox_read_seconds_by_path": {
                path: row
                for path, row in sorted(
                    getattr(nb.stats, "reads_by_path", {}).items(), key=lambda kv: -kv[1]["seconds"]
                )
            },
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "errors": done["errors"][:5],
            "stages": {row["stage"]: row["summary"] for row in done.get("stages", [])},
            "stage_seconds": {
                row["stage"]: round(row["duration_ms"] / 1000, 2) for row in done.get("stages", [])
            },
        }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    previous = json.loads(result_path(args.vms, "json", args.path).read_text()) if args.reuse else None
    if previous is not None and previous.get("vms") != args.vms:
        raise SystemExit(
            f"--reuse needs a previous run with {args.vms} VMs in {result_path(args.vms, 'json')}"
        )
    config = replace(
        netbox_up(args.instance, args.port, fresh=previous is None), apply_path=args.path == "apply"
    )
    with emulator(args.emulator, args.vms) as emu:
        plugin_pk = await plugin_hv_endpoint(config, emu)
        target = hv_target(emu, plugin_pk)
        client = ProxmoxClient(target)
        source = HvSource(1, target.name, client)
        headers = {"Authorization": f"PVEAPIToken={emu.token_id}={emu.token_secret}"}
        guests = httpx.get(
            f"{emu.api_url}/cluster/resources", params={"type": "vm"}, headers=headers, timeout=30
        ).json()["data"]
        try:
            if previous is None:
                rate = await netbox_write_rate(replace(config, apply_path=False), args.baseline_vms)
                print("netbox rate", rate, flush=True)
                since = time.time()
                initial = await run_sync(config, source, CORE)
                print("initial", initial, flush=True)
                initial["seen_by_users"] = what_users_see(netbox_database(args.instance), since)
                print("seen by users", initial["seen_by_users"], flush=True)
            else:  # the NetBox database still holds the initial sync of the previous run
                rate = previous["netbox_bulk_write"]
                initial = {k: v for k, v in previous["initial_sync"].items() if k in INITIAL_KEYS}
            if previous is not None:
                # the previous run's one-VM change is still in NetBox: put it back first (not timed)
                settle = await run_sync(config, HvSource(1, target.name, client), CORE)
                print("settle", settle["objects_written"], flush=True)
            # Resyncs take seconds, and one run on a 2-core machine swings by a second: each is measured
            # RESYNC_RUNS times and reported by its median, every run's time kept beside it.
            resyncs = [
                await run_sync(config, HvSource(1, target.name, client), CORE) for _ in range(RESYNC_RUNS)
            ]
            resync = median_run(resyncs)
            print("resync", resync, flush=True)
            guest = sorted(guests, key=lambda g: int(g["vmid"]))[len(guests) // 2]
            vmid = int(guest["vmid"])
            config_url = f"{emu.api_url}/nodes/{guest['node']}/{guest['type']}/{vmid}/config"
            ones = []
            for _ in range(RESYNC_RUNS):
                memory = int(
                    httpx.get(config_url, headers=headers, timeout=30).json()["data"].get("memory", 2048)
                )
                httpx.put(
                    config_url, data={"memory": str(memory + 512)}, headers=headers, timeout=30
                ).raise_for_status()
                ones.append(
                    await run_sync(
                        config,
                        HvSource(1, target.name, client),
                        ONE_VM,
                        only_vmids=frozenset({vmid}),
                        partial=True,
                    )
                )
            one = median_run(ones)
            one["vmid"] = vmid
            print("one vm", one, flush=True)
        finally:
            await client.aclose()
    expected_floor = initial["objects_written"] / rate["objects_per_second"]
    # Every create is needed once; so is each VM's primary-IP update (the IP must exist first). Bond/bridge
    # links on node interfaces are written as a second pass: those updates are the only avoidable writes.
    avoidable = initial["stages"].get("network-interfaces", {}).get("updated", 0)
    minimum = initial["objects_written"] - avoidable
    return {
        "benchmark": "sync",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "vms": args.vms,
        "write_path": args.path,
        "guests": len(guests),
        "emulator": args.emulator,
        "netbox_bulk_write": rate,
        "initial_sync": {
            **initial,
            "netbox_floor_seconds": round(expected_floor, 2),
            "ratio_to_netbox_floor": round(initial["seconds"] / expected_floor, 3),
            "target_ratio": 1.25,
            "minimum_objects": minimum,
            "written_to_minimum": round(initial["objects_written"] / minimum, 4),
            "target_written_to_minimum": 1.05,
        },
        "no_change_resync": {**resync, "target_seconds": 10, "target_writes": 0},
        "one_vm_change": {**one, "target_seconds": 2},
        "resyncs_measured_separately": previous is not None,
        "load_average_at_end": list(os.getloadavg()),
    }


RESYNC_RUNS = 3


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median wall time, with every run's seconds and writes beside it."""
    ranked = sorted(runs, key=lambda r: r["seconds"])
    return {
        **ranked[len(ranked) // 2],
        "runs_seconds": [r["seconds"] for r in runs],
        "runs_objects_written": [r["objects_written"] for r in runs],
    }


INITIAL_KEYS = (
    "ok",
    "seen_by_users",
    "seconds",
    "objects_written",
    "created",
    "updated",
    "deleted",
    "write_requests",
    "read_requests",
    "errors",
    "stages",
)


def result_path(vms: int, suffix: str, path: str = "rest") -> Path:
    """`sync.json` for the 1,000-VM target run; other sizes keep their own files (`sync-300vms.json`);
    apply-path runs are `sync-apply...`."""
    stem = "sync" if path == "rest" else f"sync-{path}"
    return RESULTS / (f"{stem}.{suffix}" if vms == 1000 else f"{stem}-{vms}vms.{suffix}")


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    initial = result["initial_sync"]
    left.bar(
        ["NetBox floor\n(objects / bulk rate)", "hvsync initial sync"],
        [initial["netbox_floor_seconds"], initial["seconds"]],
        color=["#9e9e9e", "#2196f3"],
    )
    left.axhline(
        initial["netbox_floor_seconds"] * 1.25, color="red", linestyle="--", label="target 1.25x floor"
    )
    left.set_ylabel("seconds")
    left.set_title(
        f"Initial sync, {result['vms']} VMs: {initial['objects_written']} objects, "
        f"ratio {initial['ratio_to_netbox_floor']}x",
        fontsize=9,
    )
    left.legend(fontsize=8)
    resync, one = result["no_change_resync"], result["one_vm_change"]
    bars = right.bar(
        ["no-change resync", "one-VM change"],
        [resync["seconds"], one["seconds"]],
        color=["#4caf50", "#ff9800"],
    )
    right.plot([-0.4, 0.4], [10, 10], "r--")
    right.plot([0.6, 1.4], [2, 2], "r--", label="targets (10 s, 2 s)")
    label_bars(right, bars, [f"{run['objects_written']} writes" for run in (resync, one)])
    right.set_ylabel("seconds")
    right.set_title("Resyncs", fontsize=9)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vms", type=int, default=1000)
    parser.add_argument("--path", choices=("rest", "apply"), default="rest", help="the sync's write path")
    parser.add_argument("--baseline-vms", type=int, default=100, help="VMs in the NetBox write-rate baseline")
    parser.add_argument("--instance", default="bench-sync")
    parser.add_argument("--port", type=int, default=8792)
    parser.add_argument(
        "--emulator",
        choices=("process", "inprocess"),
        default="process",
        help="run the emulator in its own process (default; like a remote Proxmox) or in this process",
    )
    parser.add_argument("--keep-netbox", action="store_true", help="leave the NetBox instance running")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the previous run's NetBox database and initial-sync numbers; measure only the resyncs",
    )
    args = parser.parse_args()
    try:
        result = asyncio.run(bench(args))
    finally:
        if not args.keep_netbox:
            netbox_down(args.instance)
    RESULTS.mkdir(parents=True, exist_ok=True)
    result_path(args.vms, "json", args.path).write_text(json.dumps(result, indent=2) + "\n")
    plot(result, result_path(args.vms, "png", args.path))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
