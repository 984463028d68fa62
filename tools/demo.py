#!/usr/bin/env python3
"""`make demo`: the whole of hvsync on one machine, then a full sync of the demo cluster into NetBox.

Starts the Proxmox VE emulator (demo scenario, HTTPS like a real Proxmox on its own port), the hvsync
backend, and a real NetBox with the plugin and an RQ worker; registers the endpoints; runs the full
update; prints what landed in NetBox and how to log in; and stops what it started on Ctrl-C.
`--no-wait` stops right after the summary (used by CI to prove the demo works); `--no-sync` starts and
configures everything but leaves the first full sync to the operator (the UI's full-update button).

Stopping: SIGINT (Ctrl-C) and SIGTERM, while it starts things or while it waits, both stop everything it
started (the emulator, the backend, the NetBox instance and its worker) and free their ports; a second
signal while it stops is ignored, so the stop is not cut short. The emulator and the backend run in
their own sessions (a Ctrl-C in the terminal does not reach them): the launcher stops them.
INSTANCE and STATE can be set with HVSYNC_DEMO_INSTANCE and HVSYNC_DEMO_STATE (tests use their own).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from netbox_instance import read_env  # the env file's one reader, beside its writer

REPO = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("HVSYNC_DEMO_STATE", REPO / ".demo"))
BIN = REPO / ".venv" / "bin"
INSTANCE = os.environ.get("HVSYNC_DEMO_INSTANCE", "demo")
#: how long a child gets to end after SIGTERM before it is killed, and how long `down` may take
STOP_GRACE = 10
DOWN_TIMEOUT = 120


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived: unwinds whatever the launcher was doing (a BaseException, like
    KeyboardInterrupt, so no `except Exception` on the way swallows it) into `finally: stop()`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, frame: object) -> None:
    raise Stopped(signum)


def _ignore_while_stopping(signum: int, frame: object) -> None:
    say(f"{signal.Signals(signum).name} while stopping: still stopping")


def say(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)


def free_port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])


def wait_http(url: str, what: str, timeout: float = 60, verify: bool = True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2, verify=verify).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{what} did not answer on {url}")


class Demo:
    """The demo's processes: a NetBox instance, the emulator and the backend (benchmarks name their own
    instance and state folder, so they never touch a running demo)."""

    def __init__(self, instance: str = INSTANCE, state: Path = STATE) -> None:
        #: the children by the name they were spawned under (benchmarks read a child's memory)
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.instance = instance
        self.state = state
        state.mkdir(exist_ok=True)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        log = open(self.state / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it for its lifetime
        self.children[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def stop(self) -> None:
        """Stop every child (its whole process group) and the NetBox instance; bounded in time."""
        for child in self.children.values():
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGTERM)
        for child in self.children.values():
            try:
                child.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
            # what the child started in its session (a server's workers) goes with it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        subprocess.run(
            [
                str(BIN / "python"),
                str(REPO / "tools" / "netbox_instance.py"),
                "down",
                "--name",
                self.instance,
            ],
            timeout=DOWN_TIMEOUT,
        )

    def dead_child(self) -> str | None:
        """The name of a child that has ended on its own, if any."""
        return next((name for name, child in self.children.items() if child.poll() is not None), None)

    def start_netbox(self) -> dict[str, str]:
        say("starting NetBox 4.7.3 with the hvsync plugin (first run migrates once, ~5-10 minutes)")
        subprocess.run(
            [
                str(BIN / "python"),
                str(REPO / "tools" / "netbox_instance.py"),
                "up",
                "--name",
                self.instance,
                "--fresh",
            ],
            check=True,
        )
        return read_env(REPO / ".netbox" / "instances" / self.instance / "env")

    def start_emulator(self, vms: int | None = None) -> str:
        """The demo cluster, or (`vms`, for benchmarks) the large scenario with that many guests."""
        port = free_port(8006)
        scenario = ["--scenario", "large", "--vms", str(vms)] if vms else ["--scenario", "demo"]
        self.spawn("emulator", [str(BIN / "pve-emulator"), "serve", "--port", str(port), *scenario, "--tls"])
        url = f"https://127.0.0.1:{port}"
        wait_http(f"{url}/api2/json/version", "the emulator", verify=False)
        say(f"Proxmox VE emulator ({f'{vms} guests' if vms else 'demo cluster'}) at {url}")
        return url

    def start_backend(self) -> str:
        port = free_port(8800)
        data = self.state / "backend"
        if data.exists():
            subprocess.run(["rm", "-rf", str(data)], check=True)  # the demo starts from an empty backend
        env = {**os.environ, "HVSYNC_DATA_DIR": str(data)}
        self.spawn("backend", [str(BIN / "hvsync-backend"), "serve", "--port", str(port)], env)
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/health", "the backend")
        say(f"hvsync backend at {url}")
        return url


class Plugin:
    """NetBox's REST API as the demo operator uses it (the plugin's records and its sync routes)."""

    def __init__(self, netbox: dict[str, str]) -> None:
        self.netbox = netbox
        self.http = httpx.Client(
            base_url=netbox["NETBOX_URL"] + "/api/",
            headers={"Authorization": netbox["NETBOX_AUTH_HEADER"]},
            timeout=120,
        )

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self.http.post(path, json=body)
        if r.status_code != 201:
            raise SystemExit(f"NetBox refused POST {path}: HTTP {r.status_code} {r.text[:500]}")
        return r.json()

    def get(self, path: str) -> dict[str, Any]:
        r = self.http.get(path)
        r.raise_for_status()
        return r.json()


def configure_plugin(plugin: Plugin, backend: str, emulator: str) -> str:
    """Configure hvsync the way an operator does, through the plugin: the backend endpoint with a key of
    our choosing (the plugin verifies it and bootstraps the fresh backend before it stores the row), NetBox
    itself as the inventory endpoint, and the emulator's cluster (each save pushes to the backend).
    Returns the backend key (for the terminal runner's config file)."""
    from pve_emulator import config as emulator_defaults

    netbox = plugin.netbox
    found = plugin.get("ipam/ip-addresses/?address=127.0.0.1/32")["results"]
    ip = found[0] if found else plugin.post("ipam/ip-addresses/", {"address": "127.0.0.1/32"})
    key = os.urandom(32).hex()  # the operator's candidate; the plugin stores it encrypted
    be = plugin.post(
        "plugins/hvsync/backend-endpoints/", {"name": "demo backend", "backend_url": backend, "token": key}
    )
    say(
        f"backend endpoint saved: key {be['key_state']['label'].lower()} (fingerprint {be['key_fingerprint'][:15]}...)"
    )
    token_key, _, token = netbox["NETBOX_AUTH_HEADER"].removeprefix("Bearer nbt_").partition(".")
    inv = plugin.post(
        "plugins/hvsync/inventory-endpoints/",
        {
            "name": "demo NetBox",
            "ip_address": ip["id"],
            "port": int(netbox["NETBOX_URL"].rsplit(":", 1)[1]),
            "scheme": netbox["NETBOX_URL"].split("://", 1)[0],
            "token_version": 2,
            "token_key": token_key,
            "token": token,
            "verify_ssl": False,
        },
    )
    user, _, token_name = emulator_defaults.DEFAULT_TOKEN_ID.partition("!")
    hv = plugin.post(
        "plugins/hvsync/hv-endpoints/",
        {
            "name": "demo cluster",
            "ip_address": ip["id"],
            "port": int(emulator.rsplit(":", 1)[1]),
            "username": user,
            "access_methods": ["token"],
            "token_name": token_name,
            "token_value": emulator_defaults.DEFAULT_TOKEN_SECRET,
            "verify_ssl": False,
        },
    )
    inv = plugin.get(f"plugins/hvsync/inventory-endpoints/{inv['id']}/")
    hv = plugin.get(f"plugins/hvsync/hv-endpoints/{hv['id']}/")
    pushed = (
        "pushed" if inv["pushed_credential_fingerprint"] else "not pushed yet (the sync's preflight will)"
    )
    say(f"inventory endpoint saved: {pushed}")
    where = (
        f"backend id {hv['backend_id']}" if hv["backend_id"] else "not pushed yet (the sync's preflight will)"
    )
    say(f"Proxmox endpoint saved: {where}")
    return key


def run_sync_job(plugin: Plugin) -> dict[str, Any]:
    """Queue a full sync on NetBox's job queue (the REST route behind the full-update button) and follow it."""
    job = plugin.post("plugins/hvsync/sync/schedule/", {})
    say(f"full sync queued as NetBox job {job['id']}; the RQ worker runs it")
    shown = 0
    while True:
        row = plugin.get(f"core/jobs/{job['id']}/")
        entries = row.get("log_entries") or []
        for entry in entries[shown:]:
            say(f"  [{entry.get('level', 'info')}] {entry.get('message', '')}")
        shown = len(entries)
        if row["status"]["value"] in ("completed", "failed", "errored"):
            return row
        time.sleep(1)


def write_runner_config(backend: str, key: str) -> Path:
    """The terminal runner's config for this demo (docs/terminal-runner.md), mode 0600: it holds the key."""
    path = STATE / "runner.toml"
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(f'[runner]\nurl = "{backend}"\napi_key = "{key}"\n')
    return path


def print_summary(job: dict[str, Any]) -> bool:
    block = (job.get("data") or {}).get("sync") or {}
    ok = job["status"]["value"] == "completed"
    say(f"sync job {job['id']}: {job['status']['label']}" + ("" if ok else f": {job.get('error')}"))
    totals = {k: 0 for k in ("created", "updated", "unchanged", "failed")}
    for stage in block.get("stages", []):
        s = stage.get("summary") or {}
        for k in totals:
            totals[k] += int(s.get(k) or 0)
        state = "ok" if stage.get("ok") else f"FAILED ({stage.get('failure_kind')})"
        say(
            f"  {stage['stage']:<20} {state:<8} {stage.get('duration_ms', 0) / 1000:6.1f}s  created {s.get('created', 0):>4}"
            f"  updated {s.get('updated', 0):>4}  unchanged {s.get('unchanged', 0):>4}  failed {s.get('failed', 0):>3}"
        )
    total = (block.get("runtime") or {}).get("total_ms", 0) / 1000
    say(
        f"total {total:.1f}s: created {totals['created']}, updated {totals['updated']}, "
        f"unchanged {totals['unchanged']}, failed {totals['failed']}"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-wait", action="store_true", help="stop everything after the summary")
    parser.add_argument("--no-sync", action="store_true", help="start and configure everything, run no sync")
    args = parser.parse_args()
    # from here on, SIGINT and SIGTERM unwind into `finally: demo.stop()` wherever they arrive
    signal.signal(signal.SIGINT, _raise_stopped)
    signal.signal(signal.SIGTERM, _raise_stopped)
    waiting = False
    demo = Demo()
    try:
        netbox = demo.start_netbox()
        emulator = demo.start_emulator()
        backend = demo.start_backend()
        plugin = Plugin(netbox)
        key = configure_plugin(plugin, backend, emulator)
        runner_config = write_runner_config(backend, key)
        job = None if args.no_sync else run_sync_job(plugin)
        ok = print_summary(job) if job else True
        say(
            f"NetBox: {netbox['NETBOX_URL']}  (log in as {netbox['NETBOX_ADMIN_USER']}/{netbox['NETBOX_ADMIN_PASSWORD']})"
        )
        if job:
            say(f"sync run page: {netbox['NETBOX_URL']}/plugins/hvsync/sync-runs/{job['id']}/")
        say(f"backend: {backend}/docs   emulator: {emulator}/docs   logs: {STATE}")
        say(f"metrics: {backend}/metrics (with the X-Service-API-Key header; key in {runner_config})")
        say(f"terminal runner: .venv/bin/hvsync-backend sync --config {runner_config} --all")
        if args.no_wait:
            return 0 if ok else 1
        say("running; press Ctrl-C to stop")
        waiting = True
        # Sleep in short steps (a signal's handler runs between them and raises Stopped), watching
        # the children: one that dies takes the demo down with it instead of leaving half a stack.
        while (dead := demo.dead_child()) is None:
            time.sleep(0.5)
        say(f"the {dead} ended on its own (log: {demo.state / (dead + '.log')})")
        return 1
    except Stopped as stopped:
        say(f"{stopped}: stopping everything")
        return 0 if waiting else 128 + stopped.signum
    finally:
        signal.signal(signal.SIGINT, _ignore_while_stopping)
        signal.signal(signal.SIGTERM, _ignore_while_stopping)
        say("stopping")
        demo.stop()
        say("stopped")


if __name__ == "__main__":
    sys.exit(main())
