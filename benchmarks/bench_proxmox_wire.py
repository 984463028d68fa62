"""Proxmox wire benchmark: what one Proxmox read costs the backend, on aiohttp (its wire) and on httpx.

A stage reads Proxmox once per guest: 1,000 guests, 1,000 GETs per path (configs, snapshot lists, guest
agent addresses). This reads every guest's snapshot list of the emulator's 1,000-guest cluster (over
TLS, as `make demo` serves it) the way vm-snapshots does (`ProxmoxReader`, 8 at a time, through
`ProxmoxClient`), alternating the two wires for `--rounds` rounds, and reports the wall time and the CPU
seconds the backend's process and the emulator's process spent per 1,000 reads (medians). The httpx wire
is the client with an `httpx.AsyncHTTPTransport`, as it sent every request before hv/wire.py.

Writes benchmarks/results/proxmox_wire.json and proxmox_wire.png.

Usage: .venv/bin/python benchmarks/bench_proxmox_wire.py [--vms 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
from hvsync_backend.endpoints.service import HvTarget
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.sync.proxmox import HvSource, ProxmoxReader
from pve_emulator.config import DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CONCURRENCY = 8  # ProxmoxReader's default: what every stage reads with


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_emulator(port: int, vms: int) -> subprocess.Popen[bytes]:
    command = [str(Path(sys.executable).parent / "pve-emulator"), "serve", "--port", str(port)]
    command += ["--scenario", "large", "--vms", str(vms), "--tls"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"https://127.0.0.1:{port}/api2/json/version", verify=False, timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the emulator did not answer within 60 s")


def target(port: int) -> HvTarget:
    user, token = DEFAULT_TOKEN_ID.split("!", 1)
    return HvTarget(
        id=1, name="bench (inv:1)", host="127.0.0.1", port=port, scheme="https",
        api_url=f"https://127.0.0.1:{port}/api2/json", username=user, token_name=token,
        access_methods=("token",), verify_ssl=False, enabled=True, allow_template_builds=False,
        timeout=30.0, max_retries=0, retry_backoff=0.0, token_value=DEFAULT_TOKEN_SECRET,
    )  # fmt: skip


def process_cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


async def one_round(client: ProxmoxClient, guests: list[dict[str, Any]], emulator: psutil.Process) -> dict:
    """Every guest's snapshot list through a fresh reader (nothing cached), as one stage reads them."""
    reader = ProxmoxReader(HvSource(1, "bench (inv:1)", client), concurrency=CONCURRENCY)
    emulator_before, backend_before = process_cpu(emulator), time.process_time()
    started = time.perf_counter()
    answers = await asyncio.gather(
        *(reader.get(f"nodes/{g['node']}/{g['type']}/{g['vmid']}/snapshot") for g in guests)
    )
    wall = time.perf_counter() - started
    assert all(isinstance(a, list) and a for a in answers), "every guest answers a snapshot list"
    scale = 1000 / len(guests)
    return {
        "wall_s_per_1000": round(wall * scale, 3),
        "backend_cpu_s_per_1000": round((time.process_time() - backend_before) * scale, 3),
        "emulator_cpu_s_per_1000": round((process_cpu(emulator) - emulator_before) * scale, 3),
    }


async def measure(port: int, rounds: int, emulator: psutil.Process) -> dict[str, list[dict]]:
    wires = {
        "aiohttp": ProxmoxClient(target(port)),
        "httpx": ProxmoxClient(target(port), transport=httpx.AsyncHTTPTransport(verify=False)),
    }
    guests = [g for g in await wires["aiohttp"].get("cluster/resources", {"type": "vm"}) if g.get("vmid")]
    runs: dict[str, list[dict]] = {name: [] for name in wires}
    try:
        for client in wires.values():  # warm: connections open, handshakes done
            await one_round(client, guests[:50], emulator)
        for _ in range(rounds):
            for name, client in wires.items():
                runs[name].append(await one_round(client, guests, emulator))
    finally:
        for client in wires.values():
            await client.aclose()
    return {"guests": len(guests), **runs}  # type: ignore[dict-item]


def medians(runs: list[dict]) -> dict[str, float]:
    return {key: round(statistics.median(run[key] for run in runs), 3) for key in runs[0]}


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    keys = ["wall_s_per_1000", "backend_cpu_s_per_1000", "emulator_cpu_s_per_1000"]
    labels = ["wall time", "backend CPU", "emulator CPU"]
    x = range(len(keys))
    for offset, (wire, color) in zip(
        (-0.2, 0.2), (("aiohttp", "#2196f3"), ("httpx", "#9e9e9e")), strict=True
    ):
        values = [result["median"][wire][k] for k in keys]
        bars = ax.bar([i + offset for i in x], values, 0.4, color=color, label=wire)
        ax.bar_label(bars, [f"{v:.2f}" for v in values], fontsize=8)
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("seconds per 1,000 reads (median)")
    ax.set_title(
        f"{result['guests']} guests' snapshot lists, {CONCURRENCY} at a time, TLS "
        f"(httpx/aiohttp wall: {result['httpx_to_aiohttp_wall']}x)",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vms", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()
    port = free_port()
    proc = start_emulator(port, args.vms)
    try:
        runs = asyncio.run(measure(port, args.rounds, psutil.Process(proc.pid)))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    median = {wire: medians(runs[wire]) for wire in ("aiohttp", "httpx")}
    result = {
        "benchmark": "proxmox_wire",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "guests": runs["guests"],
        "concurrency": CONCURRENCY,
        "rounds": args.rounds,
        "median": median,
        "httpx_to_aiohttp_wall": round(
            median["httpx"]["wall_s_per_1000"] / median["aiohttp"]["wall_s_per_1000"], 2
        ),
        "httpx_to_aiohttp_backend_cpu": round(
            median["httpx"]["backend_cpu_s_per_1000"] / median["aiohttp"]["backend_cpu_s_per_1000"], 2
        ),
        "runs": {wire: runs[wire] for wire in ("aiohttp", "httpx")},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "proxmox_wire.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "proxmox_wire.png")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
