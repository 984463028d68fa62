#!/usr/bin/env python3
"""``GET /cluster/resources`` of the demo scenario: server CPU per request, response cache on and off.

The same whole-stack measure as ``bench_emulator.py`` (the real CLI in a subprocess, driven over keep-alive
connections by that script's client; CPU read from the server process), on the list a monitoring tool or
hvsync reads most. Writes ``benchmarks/results/emulator_resources.json``; ``--label before`` (with
``PYTHONPATH`` pointing at another tree) records a comparison figure under that label instead.
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
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_emulator import RESULTS, throughput

PATH = "/api2/json/cluster/resources"
TARGET_UNCACHED_CPU_MS = 1.0  # issue 44: under 1 ms of server CPU per uncached request


def _start(*extra: str) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "pve_emulator", "serve", "--port", str(port), "--scenario", "demo", *extra]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError("emulator did not start")


def measure(*extra: str) -> dict[str, float]:
    proc, port = _start(*extra)
    try:
        rate, size, per_cpu = asyncio.run(throughput(port, PATH, psutil.Process(proc.pid)))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return {
        "requests_per_s": round(rate, 1),
        "server_cpu_ms_per_request": round(1000 / per_cpu, 4) if per_cpu else 0.0,
        "response_bytes": size,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="after")
    args = parser.parse_args()
    out_path = RESULTS / "emulator_resources.json"
    results = json.loads(out_path.read_text()) if out_path.is_file() else {}
    load_before = os.getloadavg()
    figures = {
        "uncached": measure("--no-response-cache"),
        "cached": measure(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    results[args.label] = figures
    results.update(
        {
            "path": PATH,
            "scenario": "demo",
            "target_uncached_cpu_ms": TARGET_UNCACHED_CPU_MS,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        }
    )
    if "after" in results:
        results["passed"] = results["after"]["uncached"]["server_cpu_ms_per_request"] < TARGET_UNCACHED_CPU_MS
    out_path.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
