"""`hvsync-backend serve` as a real process: starts, migrates, answers, and its logs hold no secrets."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

SECRET_PW = "SERVEPW-" + os.urandom(8).hex()
KEY = "serve-key-" + os.urandom(16).hex()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_process(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "HVSYNC_DATA_DIR": str(tmp_path / "data"),
        "HVSYNC_BCRYPT_ROUNDS": "4",
        "HVSYNC_LOG_LEVEL": "debug",
    }
    env.pop("HVSYNC_DATABASE_URL", None)
    cli = Path(sys.executable).with_name("hvsync-backend")
    proc = subprocess.Popen(
        [str(cli), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "service did not start"
            time.sleep(0.2)
        assert httpx.get(base + "/meta", timeout=5).json()["database"] == "sqlite"
        assert httpx.post(base + "/auth/register-key", json={"api_key": KEY}, timeout=5).status_code == 201
        h = {"X-Service-API-Key": KEY}
        r = httpx.post(
            base + "/hv/endpoints",
            headers=h,
            timeout=5,
            json={
                "name": "p (inv:1)",
                "ip_address": "127.0.0.1",
                "port": 9,
                "scheme": "http",
                "username": "root@pam",
                "password": SECRET_PW,
                "timeout": 1,
                "max_retries": 0,
            },
        )
        assert r.status_code == 201
        assert httpx.get(base + "/hv/nodes/", headers=h, timeout=10).status_code == 502
        assert (
            httpx.get(base + "/auth/keys", headers={"X-Service-API-Key": "x" * 40}, timeout=5).status_code
            == 401
        )
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert "GET /hv/nodes/" in out  # the access log was captured
    assert SECRET_PW not in out and KEY not in out
    assert (tmp_path / "data" / "hvsync.db").exists()
    assert oct((tmp_path / "data" / "fernet.key").stat().st_mode & 0o777) == "0o600"
    assert SECRET_PW.encode() not in (tmp_path / "data" / "hvsync.db").read_bytes()
