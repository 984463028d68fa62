"""`make demo` (tools/demo.py) stops everything it started on SIGINT (Ctrl-C) and on SIGTERM, while it
waits and while it is still starting things: no child process is left and every port it used is free.

Each case runs the real launcher (`tools/demo.py --no-sync`: the emulator, the backend and a NetBox
instance with its RQ worker, configured through the plugin, without the first sync) in a subprocess of
its own, on the `demo` instance's slot and a state folder of the test's; nothing of it is faked.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO

INSTANCE = "demo"  # a fixed slot (port 8767, Redis 6-7): a test claims no spare slot
INSTANCE_DIR = REPO / ".netbox" / "instances" / INSTANCE
#: how long the launcher may take to stop everything after the signal (children get 10 s, `down` 20 s)
STOP_BOUND = 60
START_BUDGET = 600  # NetBox's start on a busy 2-core machine, the emulator, the backend, the plugin


def alive(pid: int) -> bool:
    """Running (a zombie, ended but not yet reaped by its parent, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def descendants(root: int) -> set[int]:
    """Every process whose parent chain leads to `root` (the launcher's children and theirs)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier} - found
        found |= frontier
    return found


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def instance_live() -> bool:
    pid_file = INSTANCE_DIR / "pids.json"
    return pid_file.exists() and any(alive(p) for p in json.loads(pid_file.read_text()).values())


class Launcher:
    """`tools/demo.py` in a subprocess; its output lines as they come."""

    def __init__(self, state: Path) -> None:
        env = {**os.environ, "HVSYNC_DEMO_INSTANCE": INSTANCE, "HVSYNC_DEMO_STATE": str(state)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.out = state / "launcher.out"
        state.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tools" / "demo.py"), "--no-sync"],
            stdout=self.out.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
        )

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_for(self, pattern: str, budget: float) -> re.Match[str]:
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text())
            if found:
                return found
            assert self.proc.poll() is None, f"the launcher ended early:\n{self.text()[-3000:]}"
            time.sleep(0.5)
        raise AssertionError(f"no {pattern!r} within {budget} s:\n{self.text()[-3000:]}")

    def ports(self) -> set[int]:
        return {int(p) for p in re.findall(r"https?://127\.0\.0\.1:(\d+)", self.text())}


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    assert not instance_live(), "a NetBox `demo` instance is running here: stop it (make netbox-stop / down)"
    started = Launcher(tmp_path / "demo-state")
    try:
        yield started
    finally:
        if started.proc.poll() is None:  # the test failed before its signal: stop it the hard way
            started.proc.send_signal(signal.SIGTERM)
            try:
                started.proc.wait(timeout=STOP_BOUND)
            except subprocess.TimeoutExpired:
                started.proc.kill()
        subprocess.run(
            [sys.executable, str(REPO / "tools" / "netbox_instance.py"), "down", "--name", INSTANCE],
            timeout=120,
            check=False,
        )


def stop_and_check(launcher: Launcher, signum: int, ports: set[int], exit_code: int) -> None:
    """Send `signum`; within STOP_BOUND the launcher exits with `exit_code`, every process it had
    started (its descendants and the NetBox instance's server and worker) is gone, and `ports` are free."""
    children = descendants(launcher.proc.pid)
    pid_file = INSTANCE_DIR / "pids.json"
    netbox_pids = set(json.loads(pid_file.read_text()).values()) if pid_file.exists() else set()
    assert children, "the launcher has children to stop"
    t0 = time.monotonic()
    launcher.proc.send_signal(signum)
    code = launcher.proc.wait(timeout=STOP_BOUND)
    took = time.monotonic() - t0
    left = {pid for pid in children | netbox_pids if alive(pid)}
    deadline = time.monotonic() + 5  # a reaped group may take a moment to leave /proc
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = {pid for pid in left if alive(pid)}
    assert left == set(), f"left running after {signal.Signals(signum).name}: {sorted(left)}"
    busy = {port for port in ports if not port_free(port)}
    assert busy == set(), f"ports still in use after {signal.Signals(signum).name}: {sorted(busy)}"
    assert not pid_file.exists(), "the NetBox instance was not brought down"
    assert code == exit_code, launcher.text()[-2000:]
    assert took < STOP_BOUND
    assert "stopped" in launcher.text().splitlines()[-1], launcher.text()[-2000:]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_demo_waits_stops_everything_it_started(launcher: Launcher, signum: int) -> None:
    launcher.wait_for(r"running; press Ctrl-C to stop", START_BUDGET)
    ports = launcher.ports()
    # NetBox, the emulator and the backend, each on its port, all answering before the signal
    assert len(ports) >= 3, launcher.text()
    assert all(not port_free(p) for p in ports), launcher.text()
    stop_and_check(launcher, signum, ports, exit_code=0)


def test_sigterm_while_the_demo_starts_stops_what_it_had_started(launcher: Launcher) -> None:
    # after the emulator is up, before the backend or the plugin's configuration: a launcher stopped
    # half-way leaves nothing behind either (it says it was interrupted: 128 + the signal)
    launcher.wait_for(r"Proxmox VE emulator \(demo cluster\) at https://", START_BUDGET)
    ports = launcher.ports()  # NetBox's (it starts first) and the emulator's
    assert len(ports) >= 2 and all(not port_free(p) for p in ports), launcher.text()
    stop_and_check(launcher, signal.SIGTERM, ports, exit_code=128 + signal.SIGTERM)
