"""Real Proxmox tools against the emulator: their own venv, an emulator process, a clean environment.

The tools (prometheus-pve-exporter, Ansible's community.proxmox modules, proxmoxer) are installed from
the Python registry, pinned with hashes in ``requirements.txt``, into ``.tools-venv`` at the repository
root; the venv is rebuilt only when the lock file changes. Each emulator runs as its own process over
HTTPS with a self-signed certificate, as a Proxmox node does on port 8006.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from pve_emulator.config import DEFAULT_PASSWORD, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET

ROOT = Path(__file__).resolve().parents[2]
LOCK = Path(__file__).with_name("requirements.txt")
TOOLS_VENV = ROOT / ".tools-venv"
UV = ROOT / ".tools" / "bin" / "uv"
# python-requests prefers these over verify=False; a client of a self-signed server must not see them
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")


@dataclass(frozen=True, slots=True)
class RunningEmulator:
    """An emulator process: where it listens and the credentials it was started with."""

    host: str
    port: int
    user: str
    password: str
    token_id: str
    token_secret: str
    release: str
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """``host:port`` as the tools take it."""
        return f"{self.host}:{self.port}"

    @property
    def token_user(self) -> str:
        return self.token_id.split("!", 1)[0]

    @property
    def token_name(self) -> str:
        return self.token_id.split("!", 1)[1]

    def api(self) -> httpx.Client:
        """A token-authenticated client of the emulator's real paths, for reading what the tools see."""
        return httpx.Client(
            base_url=self.url + "/api2/json",
            verify=False,
            timeout=15,
            headers={"Authorization": f"PVEAPIToken={self.token_id}={self.token_secret}"},
        )

    def get(self, path: str, **params: object) -> object:
        with self.api() as client:
            response = client.get(path, params=params)
            response.raise_for_status()
            return response.json()["data"]


def _lock_digest() -> str:
    return hashlib.sha256(LOCK.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def tools_venv() -> Path:
    """The tools' venv, built from the hashed lock; rebuilt when the lock changes. Fails loudly."""
    stamp = TOOLS_VENV / ".lock-sha256"
    if stamp.exists() and stamp.read_text() == _lock_digest():
        return TOOLS_VENV
    if not UV.exists():
        pytest.fail(f"{UV} is missing: run `make setup` first")
    shutil.rmtree(TOOLS_VENV, ignore_errors=True)
    # `make` exports UV_PYTHON (the workspace's interpreter), which would beat VIRTUAL_ENV: name the target
    env = {k: v for k, v in os.environ.items() if k not in ("UV_PYTHON", "VIRTUAL_ENV")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    subprocess.run([str(UV), "venv", "-q", "--python", sys.executable, str(TOOLS_VENV)], check=True, env=env)
    target = TOOLS_VENV / "bin" / "python"
    subprocess.run(
        [str(UV), "pip", "install", "-q", "--python", str(target), "--require-hashes", "-r", str(LOCK)],
        check=True,
        env=env,
    )
    if not (TOOLS_VENV / "bin" / "pve_exporter").exists():
        pytest.fail(f"the tools were not installed into {TOOLS_VENV}")
    stamp.write_text(_lock_digest())
    return TOOLS_VENV


@pytest.fixture(scope="session")
def tool_env(tools_venv: Path) -> dict[str, str]:
    """The environment a tool runs in: its venv first on PATH, no CA-bundle overrides, no proxies."""
    env = {k: v for k, v in os.environ.items() if k not in CA_VARIABLES and not k.lower().endswith("_proxy")}
    env["PATH"] = f"{tools_venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(tools_venv)
    env.pop("PYTHONPATH", None)
    return env


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a tool or emulator process, killing it if it does not exit within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(
    tmp: Path, *, release: str = "9.1", scenario: str = "demo", extra: tuple[str, ...] = ()
) -> RunningEmulator:
    port = free_port()
    log = (tmp / f"emulator-{port}.log").open("wb")
    cmd = [
        str(ROOT / ".venv" / "bin" / "pve-emulator"),
        "serve",
        "--tls",
        "--port",
        str(port),
        "--scenario",
        scenario,
        "--release",
        release,
        *extra,
    ]
    process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    handle = RunningEmulator(
        host="127.0.0.1",
        port=port,
        user="root@pam",
        password=DEFAULT_PASSWORD,
        token_id=DEFAULT_TOKEN_ID,
        token_secret=DEFAULT_TOKEN_SECRET,
        release=release,
        process=process,
    )
    deadline = time.monotonic() + 20
    while True:
        if process.poll() is not None:
            pytest.fail(f"pve-emulator exited with {process.returncode}; see {log.name}")
        try:
            httpx.get(handle.url + "/api2/json/version", verify=False, timeout=1)
            return handle
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"pve-emulator did not answer on {handle.url} within 20 s; see {log.name}")
            time.sleep(0.1)


@pytest.fixture
def start_emulator(tmp_path: Path) -> Iterator[Callable[..., RunningEmulator]]:
    """Start emulator processes (release, scenario, extra CLI arguments); all are stopped afterwards."""
    started: list[RunningEmulator] = []

    def start(**kwargs: object) -> RunningEmulator:
        handle = _start(tmp_path, **kwargs)  # type: ignore[arg-type]
        started.append(handle)
        return handle

    yield start
    for handle in started:
        stop(handle.process)


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEmulator]:
    """One demo-scenario emulator per test module (the modules change its state)."""
    handle = _start(tmp_path_factory.mktemp("emulator"))
    yield handle
    stop(handle.process)
