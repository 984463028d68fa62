"""The Proxmox client on its own wire (aiohttp, hv/wire.py), against real sockets: what reaches Proxmox,
timeouts, TLS verification and the proxy variables. The httpx-transport wire is covered by test_hv_client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.hv.errors import ProxmoxHTTPError, ProxmoxUnreachable
from hvsync_backend.hv.wire import proxy_for
from pve_emulator.testing import running_emulator
from stage_harness import emu_target
from support import PASSWORD, SECRET, target


@dataclass
class Seen:
    line: str
    headers: dict[str, str]
    body: bytes


@dataclass
class RawServer:
    """A socket that records each request and answers from `answers` (status, reason, body) in turn; with
    no answer left it reads the request and says nothing."""

    answers: list[tuple[int, str, object]]
    seen: list[Seen] = field(default_factory=list)
    port: int = 0
    #: connections the client holds open now
    open: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *rest = head.decode().split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in rest if h)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                self.seen.append(Seen(line, headers, body))
                if not self.answers:
                    await asyncio.sleep(3600)
                status, reason, payload = self.answers.pop(0)
                data = json.dumps(payload).encode()
                writer.write(
                    f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
        finally:
            self.open -= 1


@asynccontextmanager
async def raw_server(answers: list[tuple[int, str, object]]) -> AsyncIterator[RawServer]:
    raw = RawServer(answers)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    raw.port = server.sockets[0].getsockname()[1]
    try:
        yield raw
    finally:
        server.close()


def local(port: int, **kw) -> object:
    return target(
        scheme="http", host="127.0.0.1", port=port, api_url=f"http://127.0.0.1:{port}/api2/json", **kw
    )


async def test_what_reaches_proxmox_query_form_headers_and_the_reason_of_an_error() -> None:
    answers = [
        (200, "OK", {"data": {"ticket": "PVE:root@pam:T", "CSRFPreventionToken": "csrf-1"}}),
        (200, "OK", {"data": [{"vmid": 101}]}),
        (500, "Configuration file 'nodes/pve1/qemu-server/101.conf' does not exist", {"data": None}),
    ]
    async with raw_server(answers) as raw:
        t = local(raw.port, access_methods=("password",), max_retries=0)
        async with ProxmoxClient(t) as client:
            rows = await client.get("cluster/resources", {"type": "vm", "running": True, "limit": 5})
            with pytest.raises(ProxmoxHTTPError) as info:
                await client.get("nodes/pve1/qemu/101/config")
    assert rows == [{"vmid": 101}]
    login, read, failed = raw.seen
    assert login.line == "POST /api2/json/access/ticket HTTP/1.1"
    assert login.headers["content-type"] == "application/x-www-form-urlencoded"
    assert login.body.decode() == f"username=root%40pam&password={PASSWORD}"
    assert read.line == "GET /api2/json/cluster/resources?type=vm&running=1&limit=5 HTTP/1.1"
    assert read.headers["cookie"] == "PVEAuthCookie=PVE:root@pam:T"
    assert read.headers["user-agent"] == "hvsync-backend" and read.headers["accept"] == "application/json"
    assert "csrfpreventiontoken" not in read.headers  # a read sends no CSRF token
    assert failed.line == "GET /api2/json/nodes/pve1/qemu/101/config HTTP/1.1"
    # Proxmox says what went wrong in the reason phrase; the status decides whether the guest is skipped
    assert info.value.status == 500 and "101.conf' does not exist" in str(info.value)
    assert PASSWORD not in str(info.value)


async def test_a_silent_proxmox_times_out_after_the_endpoint_timeout_and_its_retries() -> None:
    async with raw_server([]) as raw, ProxmoxClient(local(raw.port, timeout=0.3, max_retries=1)) as client:
        started = time.perf_counter()
        with pytest.raises(ProxmoxUnreachable) as info:
            await client.get("nodes")
        waited = time.perf_counter() - started
    assert "timed out after 2 attempt(s)" in str(info.value)
    assert len(raw.seen) == 2 and 0.55 < waited < 3.0
    assert SECRET not in str(info.value)


async def test_tls_is_verified_unless_the_endpoint_turns_it_off(monkeypatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with running_emulator(tls=True) as emu:
        async with ProxmoxClient(emu_target(emu, verify_ssl=True, max_retries=0)) as client:
            with pytest.raises(ProxmoxUnreachable) as info:
                await client.get("nodes")
        assert "certificate" in str(info.value).lower()
        async with ProxmoxClient(emu_target(emu, verify_ssl=False)) as client:
            nodes = await client.get("nodes")
    assert nodes and all(n["status"] == "online" for n in nodes)


async def test_requests_go_through_the_proxy_the_environment_names(monkeypatch) -> None:
    async with raw_server([(200, "OK", {"data": [{"node": "pve1"}]})]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        t = target(scheme="http", api_url="http://pve.example.invalid:8006/api2/json", max_retries=0)
        async with ProxmoxClient(t) as client:
            nodes = await client.get("nodes")
    assert nodes == [{"node": "pve1"}]
    assert proxy.seen[0].line == "GET http://pve.example.invalid:8006/api2/json/nodes HTTP/1.1"
    monkeypatch.setenv("NO_PROXY", "pve.example.invalid")
    assert proxy_for("http://pve.example.invalid:8006/api2/json") is None
    assert proxy_for("http://other.example.invalid:8006/api2/json") == f"http://127.0.0.1:{proxy.port}"


async def test_a_client_closed_under_a_running_read_still_answers_and_leaves_nothing_open() -> None:
    """The pool closes a client whose endpoint settings changed; a run may still read through it."""
    answers = [(200, "OK", {"data": [{"node": "pve1"}]}), (200, "OK", {"data": [{"node": "pve2"}]})]
    async with raw_server(answers) as raw:
        client = ProxmoxClient(local(raw.port))
        assert await client.get("nodes") == [{"node": "pve1"}]
        assert raw.open == 1  # kept alive for the next read
        await client.aclose()
        assert await client.get("nodes") == [{"node": "pve2"}]
        for _ in range(50):
            if raw.open == 0:
                break
            await asyncio.sleep(0.01)
    assert len(raw.seen) == 2 and raw.open == 0
