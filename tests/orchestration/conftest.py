"""Whole-system fixtures for the plugin's orchestration: real NetBox (gunicorn + RQ worker, plugin
installed), the real backend as a subprocess, the pve-emulator, and a fault proxy between NetBox and
the backend.

NetBox: `HVSYNC_NETBOX_ENV=<env file>` uses an instance that is already up (its code must be current);
otherwise the session starts the `orch` instance fresh (`HVSYNC_ORCH_INSTANCE`, `HVSYNC_ORCH_PORT` to
override) with tools/netbox_instance.py and stops it afterwards (`HVSYNC_ORCH_KEEP=1` keeps it up).
Sync jobs run on NetBox's own queue: tests configure the plugin through its REST API and schedule
through `sync/schedule/`, then read the job row, exactly as an operator would.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fault_proxy import FaultProxy

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
from netbox_instance import env_file, read_env  # noqa: E402 - the env file's one reader, beside its writer

BIN = REPO / ".venv" / "bin"
#: Our own NetBox instance; tools/netbox_instance.py gives every instance its own port and Redis
#: databases, so no other instance's worker can pick up our jobs.
INSTANCE = os.environ.get("HVSYNC_ORCH_INSTANCE", "orch")
PORT = os.environ.get("HVSYNC_ORCH_PORT", "")
PLUGIN_API = "plugins/hvsync/"
#: the 13 stages of a full sync, in pipeline order, as a job records them
STAGES = [
    "devices",
    "storage",
    "virtual-machines",
    "task-history",
    "vm-disks",
    "vm-backups",
    "vm-snapshots",
    "network-interfaces",
    "vm-interfaces",
    "ip-addresses",
    "sdn",
    "replications",
    "backup-routines",
]
#: The stage-stream read timeout of the NetBox instance these tests start (the plugin's
#: `stream_read_timeout`, 120 s by default; run-tests.sh starts the shared test instance with the same).
STREAM_READ_TIMEOUT = float(os.environ.setdefault("HVSYNC_STREAM_READ_TIMEOUT", "45"))
#: Planted secrets: they must never appear in job data, job logs or errors.
BACKEND_KEY = "orchKEY-" + secrets.token_hex(24)
#: The emulator's fault control API secret (test_fault_matrix.py switches faults with it).
EMULATOR_CONTROL_SECRET = "orchFAULTS-" + secrets.token_hex(16)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class NetBox:
    url: str
    auth_header: str
    #: the NetBox release the instance runs (tools/netbox_instance.py writes it into the env file)
    version: str = ""
    admin_user: str = "admin"
    admin_password: str = "admin"
    #: the instance's database and name (tools/netbox_instance.py), for the secret sweep
    db: str = ""
    instance: str = ""

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url + "/api/", headers={"Authorization": self.auth_header}, timeout=60
        )

    @property
    def token_parts(self) -> tuple[str, str]:
        key, token = self.auth_header.removeprefix("Bearer nbt_").split(".", 1)
        return key, token

    def get(self, path: str, **params: Any) -> Any:
        with self.client() as c:
            r = c.get(path, params=params)
            assert r.status_code == 200, (path, r.status_code, r.text[:500])
            return r.json()

    def post(self, path: str, body: dict[str, Any], expect: int = 201) -> Any:
        with self.client() as c:
            r = c.post(path, json=body)
            assert r.status_code == expect, (path, r.status_code, r.text[:1000])
            return r.json()

    def patch(self, path: str, body: dict[str, Any], expect: int = 200) -> Any:
        with self.client() as c:
            r = c.patch(path, json=body)
            assert r.status_code == expect, (path, r.status_code, r.text[:1000])
            return r.json()

    def upsert(self, path: str, body: dict[str, Any]) -> Any:
        """Create the record, or update the one with this name: a rerun against the same NetBox keeps
        the plugin pks, so the objects synced before keep their identity."""
        with self.client() as c:
            found = c.get(path, params={"name": body["name"]}).json()["results"]
        if found:
            return self.patch(f"{path}{found[0]['id']}/", body)
        return self.post(path, body)

    def count(self, path: str, **params: Any) -> int:
        return int(self.get(path, limit=1, **params)["count"])

    def run_sync(self, timeout: float = 600, **body: Any) -> dict[str, Any]:
        """Schedule a sync through the plugin's REST route and wait for the worker to finish it."""
        job = self.post(PLUGIN_API + "sync/schedule/", body)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = self.get(f"core/jobs/{job['id']}/")
            if row["status"]["value"] in ("completed", "failed", "errored"):
                return row
            time.sleep(0.5)
        raise AssertionError(f"job {job['id']} did not finish within {timeout}s: {row['status']}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The secret sweep reads what every other test left behind, so it runs last."""
    items.sort(key=lambda item: item.module is not None and item.module.__name__ == "test_secret_sweep")


@pytest.fixture(scope="session")
def netbox() -> Iterator[NetBox]:
    given = os.environ.get("HVSYNC_NETBOX_ENV")
    tool = [str(BIN / "python"), str(REPO / "tools" / "netbox_instance.py")]
    if given:
        env = read_env(Path(given))
    else:
        subprocess.run(
            [*tool, "up", "--name", INSTANCE, "--fresh", *(["--port", PORT] if PORT else [])],
            check=True,
            timeout=1800,
        )
        env = read_env(env_file(INSTANCE))
    try:
        yield NetBox(
            env["NETBOX_URL"],
            env["NETBOX_AUTH_HEADER"],
            env.get("NETBOX_VERSION", ""),
            env.get("NETBOX_ADMIN_USER", "admin"),
            env.get("NETBOX_ADMIN_PASSWORD", "admin"),
            env.get("NETBOX_DB", ""),
            env.get("NETBOX_INSTANCE", ""),
        )
    finally:
        if not given and not os.environ.get("HVSYNC_ORCH_KEEP"):
            subprocess.run([*tool, "down", "--name", INSTANCE], check=False, timeout=120)


@pytest.fixture(scope="session")
def emulator() -> Iterator[Any]:
    from pve_emulator.testing import running_emulator

    # the control secret serves /_emulator/faults, so a test can make Proxmox misbehave mid-job
    with running_emulator("demo", tls=True, control_secret=EMULATOR_CONTROL_SECRET) as emu:
        yield emu


@dataclass
class Backend:
    url: str
    process: subprocess.Popen[bytes]
    data_dir: Path


def start_backend(data_dir: Path) -> Backend:
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "backend.log", "ab")  # noqa: SIM115 - the child owns it
    process = subprocess.Popen(
        [str(BIN / "hvsync-backend"), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "HVSYNC_DATA_DIR": str(data_dir)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return Backend(url, process, data_dir)
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            raise RuntimeError(f"backend exited: {(data_dir / 'backend.log').read_text()[-2000:]}")
        time.sleep(0.3)
    raise RuntimeError("backend did not answer /health")


def stop_backend(backend: Backend) -> None:
    if backend.process.poll() is None:
        backend.process.terminate()
        try:
            backend.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            backend.process.kill()


@pytest.fixture(scope="session")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    made = start_backend(tmp_path_factory.mktemp("backend"))
    yield made
    stop_backend(made)


@pytest.fixture(scope="session")
def proxy(backend: Backend) -> Iterator[FaultProxy]:
    made = FaultProxy(backend.url).start()
    yield made
    made.stop()


@pytest.fixture
def faults(proxy: FaultProxy) -> Iterator[FaultProxy]:
    proxy.clear()
    yield proxy
    proxy.clear()


@dataclass
class Plugin:
    """The plugin's records as configured through its REST API."""

    backend_endpoint: dict[str, Any]
    inventory_endpoint: dict[str, Any]
    hv_endpoint: dict[str, Any]
    planted: tuple[str, ...]


@pytest.fixture(scope="session")
def plugin(netbox: NetBox, proxy: FaultProxy, emulator: Any) -> Plugin:
    """Backend endpoint (through the fault proxy), inventory endpoint (this NetBox) and the emulator's
    cluster, configured through the plugin's REST API (key adoption and push on save run for real)."""
    with netbox.client() as c:
        found = c.get("ipam/ip-addresses/", params={"address": "127.0.0.1/32"}).json()["results"]
    ip = found[0] if found else netbox.post("ipam/ip-addresses/", {"address": "127.0.0.1/32"})
    token_key, token = netbox.token_parts
    nb_port = int(netbox.url.rsplit(":", 1)[1])
    user, token_name = emulator.token_id.split("!")
    be = netbox.upsert(
        PLUGIN_API + "backend-endpoints/",
        {
            "name": "orch backend",
            "backend_url": proxy.url,
            "token": BACKEND_KEY,
            "verify_ssl": False,
            "enabled": True,
        },
    )
    inv = netbox.upsert(
        PLUGIN_API + "inventory-endpoints/",
        {
            "name": "this NetBox",
            "ip_address": ip["id"],
            "port": nb_port,
            "scheme": netbox.url.split("://", 1)[0],  # the test NetBox serves plain http
            "token_version": 2,
            "token_key": token_key,
            "token": token,
            "verify_ssl": False,
            "enabled": True,
        },
    )
    hv = netbox.upsert(
        PLUGIN_API + "hv-endpoints/",
        {
            "name": "demo cluster",
            "ip_address": ip["id"],
            "port": emulator.port,
            "username": user,
            "access_methods": ["token"],
            "token_name": token_name,
            "token_value": emulator.token_secret,
            "verify_ssl": False,
            "enabled": True,
            "timeout": 30,
            "max_retries": 1,
        },
    )
    return Plugin(be, inv, hv, (BACKEND_KEY, token, emulator.token_secret))


def assert_no_secrets(job: dict[str, Any], planted: tuple[str, ...]) -> None:
    """Planted secrets appear nowhere in the job row: data, log entries, error."""
    import json

    text = json.dumps(job)
    for secret in planted:
        assert secret not in text, "a planted secret leaked into the job row"
