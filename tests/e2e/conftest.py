"""Whole-system fixtures: a fresh real NetBox (with the plugin), pve-emulators, and the backend app.

NetBox comes from tools/netbox_instance.py as its own instance (`e2e-sync`, fresh database cloned from
the migrated template), so these tests never touch the dev or demo instance.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
from netbox_instance import read_env  # noqa: E402 - the env file's one reader, beside its writer

sys.path.insert(0, str(REPO / "packages" / "hvsync-backend" / "tests" / "sync"))

from frames_contract import assert_valid_frame  # noqa: E402
from hvsync_backend.app import create_app  # noqa: E402
from hvsync_backend.config import Settings  # noqa: E402
from hvsync_backend.sse.frames import Frame, decode_frames  # noqa: E402
from hvsync_backend.wire.sse import split_lines  # noqa: E402


def parse_stream(text: str) -> list[Frame]:
    """A whole SSE body read at once, decoded by the terminal runner's reader."""
    return list(decode_frames(split_lines([text])))


INSTANCE = os.environ.get("HVSYNC_E2E_NETBOX", "e2e-sync")
PORT = int(os.environ.get("HVSYNC_E2E_NETBOX_PORT", "8791"))
API_KEY = "e2e-" + secrets.token_hex(24)


@dataclass(frozen=True)
class NetBox:
    url: str
    auth_header: str

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url + "/api/", headers={"Authorization": self.auth_header}, timeout=60
        )

    def all(self, path: str, **params: Any) -> list[dict[str, Any]]:
        with self.client() as c:
            r = c.get(path.strip("/") + "/", params={"limit": 1000, **params})
            r.raise_for_status()
            return r.json()["results"]

    @property
    def token_parts(self) -> tuple[str, str]:
        """(token_key, token) of a v2 `Bearer nbt_<key>.<token>` header."""
        key, token = self.auth_header.removeprefix("Bearer nbt_").split(".", 1)
        return key, token


@pytest.fixture(scope="session")
def netbox() -> Iterator[NetBox]:
    tool = [sys.executable, str(REPO / "tools" / "netbox_instance.py")]
    subprocess.run(
        [*tool, "up", "--name", INSTANCE, "--fresh", "--port", str(PORT), "--workers", "3"],
        check=True,
        timeout=1800,
    )
    env = read_env(REPO / ".netbox" / "instances" / INSTANCE / "env")
    try:
        yield NetBox(env["NETBOX_URL"], env["NETBOX_AUTH_HEADER"])
    finally:
        subprocess.run([*tool, "down", "--name", INSTANCE], check=False, timeout=120)


@dataclass
class Backend:
    client: TestClient

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Service-API-Key": API_KEY}

    def stream(self, route: str, **params: Any) -> list[dict[str, Any]]:
        """Run a stage stream to its end; every frame is checked against the contract."""
        frames = []
        with self.client.stream("GET", route, params=params, headers=self.headers, timeout=1800) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            text = "".join(response.iter_text())
        for frame in parse_stream(text):
            assert_valid_frame(frame.as_dict())
            frames.append(frame.as_dict())
        assert frames and frames[-1]["event"] == "complete", frames[-3:]
        return frames

    def complete(self, route: str, **params: Any) -> dict[str, Any]:
        return self.stream(route, **params)[-1]["data"]

    def add_inventory(self, netbox: NetBox, **overrides: Any) -> dict[str, Any]:
        key, token = netbox.token_parts
        host_port = netbox.url.split("//", 1)[1]
        host, port = host_port.split(":")
        body = {
            "name": "netbox",
            "ip_address": host,
            "port": int(port),
            "scheme": "http",
            "token_version": 2,
            "token": token,
            "token_key": key,
            "verify_ssl": False,
            **overrides,
        }
        r = self.client.post("/inventory/endpoint", json=body, headers=self.headers)
        assert r.status_code == 201, r.text
        return r.json()

    def add_hv(self, emu: Any, name: str, **overrides: Any) -> dict[str, Any]:
        user, token_name = emu.token_id.split("!")
        body = {
            "name": name,
            "ip_address": "127.0.0.1",
            "port": emu.port,
            "scheme": "http",
            "username": user,
            "token_name": token_name,
            "token_value": emu.token_secret,
            "access_methods": ["token"],
            "verify_ssl": False,
            "timeout": 30,
            "max_retries": 1,
            **overrides,
        }
        r = self.client.post("/hv/endpoints", json=body, headers=self.headers)
        assert r.status_code == 201, r.text
        return r.json()


def start_backend(data: Path) -> Backend:
    """A fresh backend (own SQLite database and encryption key) with the first API key registered."""
    settings = Settings(data_dir=data, database_url=f"sqlite:///{data / 'hvsync.db'}", bcrypt_rounds=4)
    client = TestClient(create_app(settings))
    client.__enter__()
    r = client.post("/auth/register-key", json={"api_key": API_KEY, "label": "e2e"})
    assert r.status_code == 201, r.text
    return Backend(client)


@pytest.fixture
def backend_factory(tmp_path: Path) -> Iterator[Callable[[], Backend]]:
    made: list[Backend] = []

    def make() -> Backend:
        made.append(start_backend(tmp_path / f"backend{len(made)}"))
        return made[-1]

    yield make
    for backend in made:
        backend.client.__exit__(None, None, None)


def pve(emu: Any, method: str, path: str, data: dict[str, Any] | None = None) -> Any:
    """Change the emulated Proxmox through its real API (token auth), as an operator would."""
    headers = {"Authorization": f"PVEAPIToken={emu.token_id}={emu.token_secret}"}
    r = httpx.request(method, f"{emu.api_url}/{path.strip('/')}", data=data, headers=headers, timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json().get("data")


def changelog_count(netbox: NetBox) -> int:
    with netbox.client() as c:
        r = c.get("core/object-changes/", params={"limit": 1, "brief": "true"})
        r.raise_for_status()
        return int(r.json()["count"])


def add_plugin_endpoint(netbox: NetBox, name: str) -> int:
    """The plugin's own hv endpoint record (as the plugin would push it); its pk is the identity that
    the backend endpoint named `<name> (inv:<pk>)` maps to, and that sync-state sidecars point at."""
    with netbox.client() as c:
        r = c.post(
            "plugins/hvsync/hv-endpoints/",
            json={
                "name": name,
                "domain": f"{name.replace(' ', '-')}.example",
                "port": 8006,
                "username": "root@pam",
                "token_name": "hvsync",
                "token_value": "plugin-side-secret-value",
                "access_methods": ["token"],
            },
        )
        assert r.status_code == 201, r.text
        return int(r.json()["id"])
