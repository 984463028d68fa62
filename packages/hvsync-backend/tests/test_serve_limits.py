"""`hvsync-backend serve` under hostile connections (issue 39 section 3), as a real process on loopback:
half-open and trickling connections are closed after the header timeout and `/health` keeps answering;
a stranger's announced 20 MB body is refused without being read. Floods are bounded in count and time."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hvsync_backend.config import Settings
from hvsync_backend.serving import HeaderTimeoutProtocol, uvicorn_config

HEADER_TIMEOUT = 2.0
MAX_CONNECTIONS = 40
KEY = "serve-limits-" + os.urandom(16).hex()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("serve-limits")
    port = free_port()
    env = {
        **os.environ,
        "HVSYNC_DATA_DIR": str(data),
        "HVSYNC_BCRYPT_ROUNDS": "4",
        "HVSYNC_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
        "HVSYNC_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
        "HVSYNC_LOG_LEVEL": "warning",
    }
    env.pop("HVSYNC_DATABASE_URL", None)
    cli = Path(sys.executable).with_name("hvsync-backend")
    proc = subprocess.Popen(
        [str(cli), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
        assert httpx.post(base + "/auth/register-key", json={"api_key": KEY}, timeout=5).status_code == 201
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closes the connection (EOF or reset) within ``within`` seconds."""
    sock.settimeout(within)
    try:
        while True:
            if sock.recv(4096) == b"":
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_half_open_connections_are_closed_and_health_keeps_answering(served: str) -> None:
    """More half-open connections than the connection cap: silent ones, and ones trickling a header."""
    silent, trickling = [], []
    try:
        opened = time.monotonic()
        for _ in range(MAX_CONNECTIONS):
            silent.append(socket.create_connection(("127.0.0.1", _port(served)), timeout=5))
        for _ in range(10):
            sock = socket.create_connection(("127.0.0.1", _port(served)), timeout=5)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            trickling.append(sock)
        for _ in range(int(HEADER_TIMEOUT / 0.4) + 2):  # a header byte every 0.4 s never finishes a request
            for sock in trickling:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X")
            time.sleep(0.4)
        # /health answers within the header timeout plus a margin, though the flood filled the cap.
        deadline = opened + HEADER_TIMEOUT + 8
        status = None
        while time.monotonic() < deadline:
            try:
                status = httpx.get(served + "/health", timeout=3).status_code
            except httpx.TransportError:
                status = None
            if status == 200:
                break
            time.sleep(0.2)
        answered_after = time.monotonic() - opened
        assert status == 200, f"/health did not answer within {HEADER_TIMEOUT + 8} s"
        closed = [_closed_by_server(s, within=HEADER_TIMEOUT + 3) for s in silent + trickling]
        assert all(closed), f"{closed.count(False)} half-open connections still open"
        print(f"/health 200 after {answered_after:.1f} s; {len(closed)} half-open connections closed")
    finally:
        for sock in silent + trickling:
            sock.close()


def test_keep_alive_connections_get_the_same_header_deadline(served: str) -> None:
    with socket.create_connection(("127.0.0.1", _port(served)), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /health HTTP/1.1\r\n")  # the second request's headers never finish
        started = time.monotonic()
        assert _closed_by_server(sock, within=HEADER_TIMEOUT + 5)
        assert time.monotonic() - started < HEADER_TIMEOUT + 5


def test_an_announced_huge_body_from_a_stranger_is_refused_unread(served: str) -> None:
    """20 MB announced, none sent: the 401 comes at once and the connection is closed."""
    with socket.create_connection(("127.0.0.1", _port(served)), timeout=10) as sock:
        sock.sendall(
            b"POST /hv/endpoints HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-Service-API-Key: " + b"w" * 40 + b"\r\nContent-Length: 20000000\r\n\r\n{"
        )
        data = b""
        sock.settimeout(5)
        while chunk := sock.recv(65536):
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].lower()
    assert data.startswith(b"HTTP/1.1 401") and b"connection: close" in head
    assert b'{"detail":"Invalid API key"}' in data
    with socket.create_connection(("127.0.0.1", _port(served)), timeout=10) as sock:
        sock.sendall(
            b"POST /hv/endpoints HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-Service-API-Key: " + KEY.encode() + b"\r\nContent-Length: 20000000\r\n\r\n{"
        )
        data = b""
        sock.settimeout(5)
        while chunk := sock.recv(65536):
            data += chunk
    assert data.startswith(b"HTTP/1.1 413") and b"HVSYNC_MAX_BODY_BYTES" in data


def test_serve_passes_every_limit_to_uvicorn() -> None:
    settings = Settings(
        header_timeout_seconds=7, keep_alive_seconds=4, max_connections=300, max_header_bytes=32768
    )
    config = uvicorn_config(object(), settings, "127.0.0.1", 8800)
    assert issubclass(config.http, HeaderTimeoutProtocol) and config.http.header_timeout == 7
    assert config.timeout_keep_alive == 4 and config.limit_concurrency == 300
    assert config.h11_max_incomplete_event_size == 32768 and config.proxy_headers is False
    defaults = Settings()
    assert (defaults.header_timeout_seconds, defaults.keep_alive_seconds) == (10.0, 5)
    assert (defaults.max_connections, defaults.max_body_bytes) == (512, 1_048_576)
