"""Real mode in front of a "real" Proxmox VE: a mock-mode emulator in another process, over TLS.

Proves pass-through of both credential styles, refusal of bad requests before they leave, response
drift detection (an upstream wrapper rewrites one answer), error pass-through, timeouts and retries,
unreachable upstreams, TLS verification, server-side credentials, and proxmoxer working unchanged.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from proxmoxer import ProxmoxAPI
from pve_emulator.config import DEFAULT_PASSWORD, DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET, EmulatorConfig
from pve_emulator.proxy.testing import running_proxy, serve_in_thread
from pve_emulator.server import create_app
from pve_emulator.tls import ensure_certificate

TOKEN = f"PVEAPIToken={DEFAULT_TOKEN_ID}={DEFAULT_TOKEN_SECRET}"
AUTH = {"Authorization": TOKEN}
SERVE = [sys.executable, "-m", "pve_emulator", "serve"]


@functools.cache
def _ctx(pem: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pem))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cert, _ = ensure_certificate(tmp_path_factory.mktemp("tls"))
    return cert


def _wait_ready(url: str, verify: Any, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stdout.read().decode() if proc.stdout else ''}")
        try:
            if httpx.get(url + "/api2/json/version", verify=verify, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not start")


@pytest.fixture(scope="module")
def upstream(pem: Path) -> Iterator[str]:
    """The "real" Proxmox VE: a mock-mode emulator in its own process, HTTPS with our test certificate."""
    port = _free_port()
    proc = subprocess.Popen(
        [*SERVE, "--tls", "--cert", str(pem), "--key", str(pem), "--port", str(port), "--task-duration", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        _wait_ready(url, _ctx(pem), proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def proxy(upstream: str, pem: Path) -> Iterator[str]:
    """Real mode over HTTPS (what proxmoxer expects), verifying the upstream with the test CA."""
    with running_proxy(upstream, cert=pem, ca_file=pem) as (url, _app):
        yield url


class Recorder:
    """Wraps a mock-mode app: records requests, and can rewrite the answer of one path (drift)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[str] = []
        self.rewrite: dict[str, Any] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        self.seen.append(f"{scope['method']} {scope['path']}")
        change = self.rewrite.get(scope["path"])
        if change is None:
            return await self.app(scope, receive, send)
        start: dict[str, Any] = {}

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            body = json.dumps(change(json.loads(message["body"]))).encode()
            headers = [(k, v) for k, v in start["headers"] if k != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, capture)


@pytest.fixture
def recorder(pem: Path) -> Iterator[tuple[str, Recorder]]:
    rec = Recorder(create_app(EmulatorConfig(task_duration=0)))
    with serve_in_thread(rec, cert=pem) as url:
        yield url, rec


# -- credentials pass through -----------------------------------------------------------------------


def test_token_passes_through_and_data_matches_direct_call(proxy: str, upstream: str, pem: Path) -> None:
    direct = httpx.get(upstream + "/api2/json/nodes/pve1/qemu", headers=AUTH, verify=_ctx(pem))
    via = httpx.get(proxy + "/api2/json/nodes/pve1/qemu", headers=AUTH, verify=_ctx(pem))
    assert via.status_code == 200 and "x-pve-emulator-drift" not in via.headers
    vmids = sorted(g["vmid"] for g in via.json()["data"])
    assert vmids == sorted(g["vmid"] for g in direct.json()["data"])
    assert 100 in vmids and len(vmids) >= 5
    # bare face: the value itself, and paging applied by real mode for a list that does not declare it
    bare = httpx.get(proxy + "/nodes", params={"limit": 2}, headers=AUTH, verify=_ctx(pem))
    assert bare.status_code == 200 and [n["node"] for n in bare.json()] == ["pve1", "pve2"]


def test_real_mode_in_front_of_the_mock_reports_no_drift_on_a_closed_object(
    proxy: str, upstream: str, pem: Path
) -> None:
    """``GET /access/users/{userid}`` is closed (additionalProperties 0): the mock keeps to it."""
    via = httpx.get(proxy + "/api2/json/access/users/root@pam", headers=AUTH, verify=_ctx(pem))
    assert via.status_code == 200 and "x-pve-emulator-drift" not in via.headers
    direct = httpx.get(upstream + "/api2/json/access/users/root@pam", headers=AUTH, verify=_ctx(pem))
    assert via.json() == direct.json() and "realm-type" not in via.json()["data"]


def test_no_credentials_is_upstream_401_passed_on(proxy: str, pem: Path) -> None:
    r = httpx.get(proxy + "/api2/json/nodes", verify=_ctx(pem))
    assert r.status_code == 401 and r.json() == {"data": None, "message": "No ticket\n"}
    wrong = httpx.get(
        proxy + "/api2/json/nodes", headers={"Authorization": TOKEN[:-4] + "0000"}, verify=_ctx(pem)
    )
    # pveproxy answers every token failure (bad secret, expired, owner disabled) with the same text
    assert wrong.status_code == 401 and wrong.json() == {"data": None, "message": "Authentication failed!\n"}


def test_ticket_and_csrf_pass_through(proxy: str, upstream: str, pem: Path) -> None:
    with httpx.Client(base_url=proxy + "/api2/json", verify=_ctx(pem)) as c:
        login = c.post("/access/ticket", data={"username": "root@pam", "password": DEFAULT_PASSWORD})
        assert login.status_code == 200
        ticket = login.json()["data"]["ticket"]
        assert "PVEAuthCookie=" in login.headers["set-cookie"]  # the upstream's cookie, passed back
        csrf = login.json()["data"]["CSRFPreventionToken"]
        c.cookies.clear()
        c.cookies.set("PVEAuthCookie", ticket)
        assert c.get("/nodes/pve1/status").json()["data"]["cpuinfo"]["cpus"] > 0
        no_csrf = c.post("/nodes/pve1/qemu/103/snapshot", data={"snapname": "viaproxy"})
        assert no_csrf.status_code == 401 and "csrf" in no_csrf.json()["message"]
        ok = c.post(
            "/nodes/pve1/qemu/103/snapshot",
            data={"snapname": "viaproxy"},
            headers={"CSRFPreventionToken": csrf},
        )
        assert ok.status_code == 200 and ok.json()["data"].startswith("UPID:pve1:")
    snaps = httpx.get(upstream + "/api2/json/nodes/pve1/qemu/103/snapshot", headers=AUTH, verify=_ctx(pem))
    assert "viaproxy" in [s["name"] for s in snaps.json()["data"]]


def test_proxmoxer_works_through_real_mode(proxy: str, upstream: str, pem: Path) -> None:
    port = int(proxy.rsplit(":", 1)[1])
    prox = ProxmoxAPI("127.0.0.1", port=port, user="root@pam", password=DEFAULT_PASSWORD, verify_ssl=str(pem))
    assert prox.version.get()["release"]
    upid = prox.nodes("pve2").qemu.post(vmid=4321, name="through-proxy", memory=1024, cores=1)
    assert upid.startswith("UPID:pve2:")
    assert prox.nodes("pve2").qemu(4321).config.get()["name"] == "through-proxy"
    tokened = ProxmoxAPI(
        "127.0.0.1",
        port=port,
        user="root@pam",
        token_name="hvsync",
        token_value=DEFAULT_TOKEN_SECRET,
        verify_ssl=str(pem),
    )
    assert 4321 in [g["vmid"] for g in tokened.nodes("pve2").qemu.get()]
    direct = httpx.get(upstream + "/api2/json/nodes/pve2/qemu/4321/config", headers=AUTH, verify=_ctx(pem))
    assert direct.json()["data"]["memory"] in (1024, "1024")


# -- validation both ways ---------------------------------------------------------------------------


def test_bad_request_is_refused_before_it_leaves(recorder: tuple[str, Recorder], pem: Path) -> None:
    url, rec = recorder
    with running_proxy(url, ca_file=pem) as (proxy_url, _):
        bad = {"vmid": "abc", "memory": "-5", "bogus": "1"}
        r = httpx.post(proxy_url + "/api2/json/nodes/pve1/qemu", data=bad, headers=AUTH)
        assert r.status_code == 400
        assert set(r.json()["errors"]) == {"vmid", "memory", "bogus"}
        assert "integer" in r.json()["errors"]["vmid"]
        bare = httpx.post(proxy_url + "/nodes/pve1/qemu", json={"vmid": 150, "cores": 0}, headers=AUTH)
        assert bare.status_code == 400
        assert bare.json() == {
            "detail": "Parameter verification failed.",
            "errors": [{"field": "cores", "message": "value must have a minimum value of 1"}],
        }
        unknown = httpx.get(proxy_url + "/api2/json/nodes/pve1/frobnicate", headers=AUTH)
        assert unknown.status_code == 404
        assert rec.seen == []  # nothing reached the upstream
        good = httpx.get(proxy_url + "/api2/json/nodes/pve1/qemu", params={"full": "1"}, headers=AUTH)
        assert good.status_code == 200 and rec.seen == ["GET /api2/json/nodes/pve1/qemu"]


def _break_nodes(body: dict[str, Any]) -> dict[str, Any]:
    body["data"][0]["maxmem"] = "lots"
    del body["data"][1]["node"]
    return body


def test_response_drift_is_reported_with_header_and_log(
    recorder: tuple[str, Recorder], pem: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, rec = recorder
    rec.rewrite["/api2/json/nodes"] = _break_nodes
    with (
        caplog.at_level(logging.WARNING, logger="pve_emulator.proxy"),
        running_proxy(url, ca_file=pem) as (proxy_url, _),
    ):
        r = httpx.get(proxy_url + "/api2/json/nodes", headers=AUTH)
        clean = httpx.get(proxy_url + "/api2/json/cluster/status", headers=AUTH)
    assert r.status_code == 200 and r.json()["data"][0]["maxmem"] == "lots"  # passed on, flagged
    drift = r.headers["x-pve-emulator-drift"]
    assert drift.startswith("2 problem(s)")
    assert "data[0].maxmem: string where integer expected" in drift
    assert "data[1]: required property 'node' is missing" in drift
    assert "x-pve-emulator-drift" not in clean.headers
    lines = [rec.getMessage() for rec in caplog.records if "schema drift" in rec.getMessage()]
    assert len(lines) == 1 and "GET /nodes" in lines[0] and "data[0].maxmem" in lines[0]


def test_response_drift_fails_with_502_when_configured(recorder: tuple[str, Recorder], pem: Path) -> None:
    url, rec = recorder
    rec.rewrite["/api2/json/version"] = lambda body: {"data": {"version": 9, "repoid": "x"}}
    with running_proxy(url, ca_file=pem, on_drift="fail") as (proxy_url, _):
        real = httpx.get(proxy_url + "/api2/json/version")
        bare = httpx.get(proxy_url + "/version")
    assert real.status_code == 502
    assert real.json()["errors"] == {
        "data.version": "integer where string expected",
        "data": "required property 'release' is missing",
    }
    assert "breaks the API schema (GET /version" in real.json()["message"]
    assert bare.status_code == 502
    assert {"field": "data.version", "message": "integer where string expected"} in bare.json()["errors"]


# -- errors, timeouts, unreachable, TLS -------------------------------------------------------------


def test_upstream_errors_keep_status_and_errors_map(proxy: str, pem: Path) -> None:
    dup = httpx.post(
        proxy + "/api2/json/access/users", data={"userid": "root@pam"}, headers=AUTH, verify=_ctx(pem)
    )
    assert dup.status_code == 400
    assert dup.json()["errors"] == {"userid": "user 'root@pam' already exists"}
    missing = httpx.get(proxy + "/nodes/pve1/qemu/999/config", headers=AUTH, verify=_ctx(pem))
    assert missing.status_code == 404 and "999" in missing.json()["detail"]


class SlowUpstream:
    """Answers after ``delay`` seconds and counts the requests it got."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.calls.append(scope["method"])
        await asyncio.sleep(self.delay)
        body = b'{"data":{"version":"9.1.1","release":"9.1","repoid":"abc"}}'
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


def test_timeouts_give_504_and_only_idempotent_requests_are_retried() -> None:
    slow = SlowUpstream(delay=1.5)
    with serve_in_thread(slow) as url, running_proxy(url, read_timeout=0.2, retries=1) as (proxy_url, _):
        started = time.monotonic()
        r = httpx.get(proxy_url + "/api2/json/nodes/pve1/qemu", headers=AUTH, timeout=10)
        assert r.status_code == 504
        assert r.json()["message"] == f"upstream {url} did not answer within 0.2 s\n"
        assert slow.calls == ["GET", "GET"]  # one retry
        assert time.monotonic() - started < 1.4  # gave up long before the 1.5 s answer
        slow.calls.clear()
        post = httpx.post(proxy_url + "/nodes/pve1/qemu", data={"vmid": "160"}, headers=AUTH, timeout=10)
        assert post.status_code == 504 and "did not answer" in post.json()["detail"]
        assert slow.calls == ["POST"]  # never retried


def test_unreachable_upstream_is_502_never_500() -> None:
    port = _free_port()  # nothing listens there
    with running_proxy(f"http://127.0.0.1:{port}", retries=1) as (proxy_url, _):
        r = httpx.get(proxy_url + "/api2/json/nodes", headers=AUTH)
        bare = httpx.delete(proxy_url + "/nodes/pve1/qemu/100", headers=AUTH)
    assert r.status_code == 502
    assert r.json() == {
        "data": None,
        "message": f"upstream http://127.0.0.1:{port} is unreachable (connection failed)\n",
    }
    assert bare.status_code == 502 and "unreachable" in bare.json()["detail"]


def test_tls_verification_is_on_by_default(upstream: str, pem: Path) -> None:
    with running_proxy(upstream) as (proxy_url, _):
        r = httpx.get(proxy_url + "/api2/json/version")
    assert r.status_code == 502 and "TLS verification of upstream" in r.json()["message"]
    with running_proxy(upstream, verify_tls=False) as (proxy_url, _):
        assert httpx.get(proxy_url + "/api2/json/version").json()["data"]["release"]


# -- server-side credentials ------------------------------------------------------------------------


def test_server_side_user_logs_in_and_renews_after_upstream_401(
    upstream: str, pem: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with running_proxy(upstream, ca_file=pem, user="root@pam", password=DEFAULT_PASSWORD) as (url, app):
        r = httpx.get(url + "/api2/json/nodes")
        assert r.status_code == 200 and [n["node"] for n in r.json()["data"]] == ["pve1", "pve2", "pve3"]
        post = httpx.post(url + "/api2/json/nodes/pve1/qemu/106/snapshot", data={"snapname": "srv"})
        assert post.status_code == 200, post.text  # CSRF header added for writes
        app.credentials._ticket = "PVE:root@pam:00000000::forged"  # as if the upstream restarted
        again = httpx.get(url + "/api2/json/cluster/status")
        assert again.status_code == 200 and again.json()["data"][0]["type"] == "cluster"
    with running_proxy(
        upstream, ca_file=pem, token_id=DEFAULT_TOKEN_ID, token_secret=DEFAULT_TOKEN_SECRET
    ) as (
        url,
        _,
    ):
        assert httpx.get(url + "/nodes/pve1/lxc").status_code == 200


def test_wrong_server_password_is_502_without_the_secret(
    upstream: str, pem: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-Planted-Password-77"
    with (
        caplog.at_level(logging.DEBUG),
        running_proxy(upstream, ca_file=pem, user="root@pam", password=secret) as (url, app),
    ):
        r = httpx.get(url + "/api2/json/nodes")
    assert r.status_code == 502
    assert r.json()["message"] == "login of root@pam refused upstream: 401 authentication failure\n"
    assert secret not in r.text and secret not in caplog.text and secret not in repr(app.credentials)


# -- the command line -------------------------------------------------------------------------------


def test_cli_serves_real_mode_and_refuses_bad_flags(upstream: str, pem: Path) -> None:
    port = _free_port()
    env = {**os.environ, "PVE_EMULATOR_UPSTREAM_TOKEN_SECRET": DEFAULT_TOKEN_SECRET}
    cmd = [sys.executable, "-m", "pve_emulator", "serve", "--mode", "real", "--upstream", upstream]
    proc = subprocess.Popen(
        [*cmd, "--ca-file", str(pem), "--port", str(port), "--upstream-token-id", DEFAULT_TOKEN_ID],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_ready(f"http://127.0.0.1:{port}", False, proc)
        r = httpx.get(f"http://127.0.0.1:{port}/api2/json/nodes/pve3/qemu")  # server-side token
        assert r.status_code == 200 and 102 in [g["vmid"] for g in r.json()["data"]]
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0].decode()
    assert "real mode on http://127.0.0.1" in out and DEFAULT_TOKEN_SECRET not in out
    missing = subprocess.run(
        [sys.executable, "-m", "pve_emulator", "serve", "--mode", "real"], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "--mode real needs --upstream" in missing.stderr
    no_secret = subprocess.run(
        [*cmd, "--upstream-user", "root@pam"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PVE_EMULATOR_")},
    )
    assert no_secret.returncode == 2 and "PVE_EMULATOR_UPSTREAM_PASSWORD" in no_secret.stderr


# -- the response checker on plain data -------------------------------------------------------------


def test_response_checker_on_plain_data() -> None:
    from pve_emulator.returns import MAX_PROBLEMS, check_response
    from pve_emulator.schema import load_schema

    op = load_schema().operation("GET", "/nodes/{node}/qemu")
    good = [{"vmid": 100, "status": "running", "template": 1}, {"vmid": 101, "status": "stopped"}]
    assert check_response(op, good) == []
    bad = [
        {"vmid": 100.5, "status": "sleeping"},
        {"status": "running"},
        {"vmid": 102, "status": "running", "template": 2},
    ]
    assert [str(d) for d in check_response(op, bad)] == [
        "data[0].status: value outside the declared enumeration",
        "data[0].vmid: number where integer expected",
        "data[1]: required property 'vmid' is missing",
        "data[2].template: integer where boolean expected",
    ]
    assert "sleeping" not in " ".join(str(d) for d in check_response(op, bad))  # values never reported
    assert len(check_response(op, [{"vmid": "x", "status": "running"}] * 1000)) == MAX_PROBLEMS
    assert [str(d) for d in check_response(op, {"vmid": 1})] == ["data: object where array expected"]


def test_response_checker_flags_undeclared_properties_of_closed_objects() -> None:
    from pve_emulator.returns import check_response
    from pve_emulator.schema import load_schema

    op = load_schema().operation("GET", "/access/users/{userid}")
    assert op.returns["additionalProperties"] == 0  # the premise: the schema closes this object
    assert check_response(op, {"email": "a@example.com", "enable": 1}) == []
    drift = check_response(op, {"email": "a@example.com", "password-hash": "x"})
    assert [str(d) for d in drift] == ["data.password-hash: property not declared by the schema"]
