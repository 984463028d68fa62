"""The console entry point serves the API from a separate process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest
from pve_emulator.cli import parser
from pve_emulator.mock.release_info import RELEASES


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _login_when_up(proc: subprocess.Popen[bytes], port: int, password: str) -> httpx.Response:
    """Log in to a just-started emulator process as soon as it listens (fails if it exits or never does)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return httpx.post(
                f"http://127.0.0.1:{port}/api2/json/access/ticket",
                data={"username": "root@pam", "password": password},
                timeout=2,
            )
        except httpx.TransportError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "emulator did not start"
            time.sleep(0.05)


def test_python_m_serve_answers_and_stops() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pve_emulator",
            "serve",
            "--port",
            str(port),
            "--scenario",
            "large",
            "--vms",
            "12",
            "--nodes",
            "2",
            "--password",
            "cli-pass-123",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        resp = _login_when_up(proc, port, "cli-pass-123")
        assert resp.status_code == 200
        cookies = {"PVEAuthCookie": resp.json()["data"]["ticket"]}
        nodes = httpx.get(f"http://127.0.0.1:{port}/api2/json/nodes", cookies=cookies, timeout=5).json()[
            "data"
        ]
        assert sorted(n["node"] for n in nodes) == ["pve1", "pve2"]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert b"large scenario on http://127.0.0.1:" in out and b"cli-pass-123" not in out


@pytest.mark.parametrize("release", ["8.4", "9.1"])
def test_cli_release_flag_sets_what_version_reports(release: str) -> None:
    port = _free_port()
    cmd = [sys.executable, "-m", "pve_emulator", "serve", "--port", str(port), "--release", release]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        session = _login_when_up(proc, port, "pve-emulator").json()["data"]
        version = httpx.get(
            f"http://127.0.0.1:{port}/api2/json/version",
            cookies={"PVEAuthCookie": session["ticket"]},
            timeout=5,
        ).json()["data"]
        assert (version["release"], version["version"]) == (release, RELEASES[release].version)
        assert version["version"].split(".")[:2] == release.split(".")
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_cli_rejects_bad_flags() -> None:
    args = parser().parse_args(["serve", "--scenario", "large", "--vms", "5", "--tls"])
    assert args.tls and args.vms == 5 and args.user == "root@pam"
    try:
        parser().parse_args(["serve", "--scenario", "huge"])
    except SystemExit as exc:
        assert exc.code == 2
    else:  # pragma: no cover
        raise AssertionError("unknown scenario accepted")


def _serve_fails(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pve_emulator", "serve", "--port", str(_free_port()), *flags],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_unknown_release_is_a_usage_error_naming_the_known_ones() -> None:
    """Mock mode refuses an unknown ``--release`` like real mode does: exit 2, no traceback, not started."""
    from pve_emulator.schema import RELEASE_FILES

    done = _serve_fails("--release", "7.0")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "usage: pve-emulator" in done.stderr
    assert "unknown API release '7.0'; known: 9.1, 8.4" in done.stderr
    assert set(RELEASE_FILES) == {"9.1", "8.4"}
    assert "scenario on http" not in done.stdout  # refused before announcing a server


def test_token_id_without_user_part_is_a_usage_error() -> None:
    done = _serve_fails("--token-id", "hvsync")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--token-id must look like user@realm!name" in done.stderr
