"""ProxmoxClient against httpx.MockTransport fakes: auth headers, tickets, retries, typed errors."""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qs

import httpx
import pytest
from hvsync_backend.hv import client as client_mod
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.hv.errors import ProxmoxAuthError, ProxmoxHTTPError, ProxmoxUnreachable
from support import PASSWORD, SECRET, target


def ok(data) -> httpx.Response:
    return httpx.Response(200, json={"data": data})


async def test_token_auth_header_and_unwrapped_data() -> None:
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return ok([{"node": "pve1", "status": "online"}])

    async with ProxmoxClient(target(), transport=httpx.MockTransport(handler)) as c:
        data = await c.get("/nodes", params={"type": "node"})
    assert data == [{"node": "pve1", "status": "online"}]
    assert seen[0].url == "https://192.0.2.20:8006/api2/json/nodes?type=node"
    assert seen[0].headers["Authorization"] == f"PVEAPIToken=root@pam!hvsync={SECRET}"


async def test_ticket_login_cached_csrf_on_writes_and_renewal(monkeypatch) -> None:
    logins = []
    tickets = iter(["PVE:ticket-1", "PVE:ticket-2"])

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/access/ticket"):
            form = parse_qs(request.content.decode())
            assert form == {"username": ["root@pam"], "password": [PASSWORD]}
            logins.append(1)
            return ok({"ticket": next(tickets), "CSRFPreventionToken": "csrf-x", "username": "root@pam"})
        assert "Authorization" not in request.headers
        if request.method == "POST":
            assert request.headers["CSRFPreventionToken"] == "csrf-x"
        return ok({"cookie": request.headers["Cookie"]})

    t = target(access_methods=("password",))
    async with ProxmoxClient(t, transport=httpx.MockTransport(handler)) as c:
        assert await c.get("/version") == {"cookie": "PVEAuthCookie=PVE:ticket-1"}
        assert await c.post("/nodes/pve1/qemu", data={"vmid": 100}) == {
            "cookie": "PVEAuthCookie=PVE:ticket-1"
        }
        assert len(logins) == 1
        real = time.monotonic
        monkeypatch.setattr(client_mod.time, "monotonic", lambda: real() + client_mod.TICKET_RENEW_AFTER + 1)
        assert await c.get("/version") == {"cookie": "PVEAuthCookie=PVE:ticket-2"}
        assert len(logins) == 2


async def test_expired_ticket_401_relogs_once() -> None:
    state = {"logins": 0, "calls": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/access/ticket"):
            state["logins"] += 1
            return ok({"ticket": f"T{state['logins']}", "CSRFPreventionToken": "c"})
        state["calls"] += 1
        if request.headers["Cookie"] == "PVEAuthCookie=T1":
            return httpx.Response(401, json={"data": None})
        return ok("fine")

    async with ProxmoxClient(
        target(access_methods=("password",)), transport=httpx.MockTransport(handler)
    ) as c:
        assert await c.get("/version") == "fine"
    assert state == {"logins": 2, "calls": 2}


async def test_token_refused_falls_back_to_password() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/access/ticket"):
            return ok({"ticket": "T", "CSRFPreventionToken": "c"})
        if "Authorization" in request.headers:
            return httpx.Response(401, json={"data": None})
        return ok("via-ticket")

    t = target(access_methods=("token", "password"))
    async with ProxmoxClient(t, transport=httpx.MockTransport(handler)) as c:
        assert await c.get("/version") == "via-ticket"


async def test_auth_error_names_endpoint_never_secret() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"data": None, "message": f"bad token {SECRET}"})

    async with ProxmoxClient(target(), transport=httpx.MockTransport(handler)) as c:
        with pytest.raises(ProxmoxAuthError) as info:
            await c.get("/nodes")
    message = str(info.value)
    assert "pve-a (inv:7)" in message and "192.0.2.20:8006" in message and "hv endpoint 3" in message
    assert SECRET not in message and info.value.status == 401


async def test_no_usable_credentials() -> None:
    async with ProxmoxClient(target(token_value=None), transport=httpx.MockTransport(lambda r: ok(1))) as c:
        with pytest.raises(ProxmoxAuthError, match="no usable credentials"):
            await c.get("/nodes")


async def test_get_retries_5xx_and_transport_errors_then_succeeds() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectError("refused")
        if len(calls) == 2:
            return httpx.Response(503, json={"data": None})
        return ok("third time")

    async with ProxmoxClient(target(max_retries=2), transport=httpx.MockTransport(handler)) as c:
        assert await c.get("/nodes") == "third time"
    assert len(calls) == 3


async def test_get_gives_up_after_max_retries_with_backoff() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(time.monotonic())
        raise httpx.ConnectError("connection refused")

    async with ProxmoxClient(
        target(max_retries=2, retry_backoff=0.05), transport=httpx.MockTransport(handler)
    ) as c:
        with pytest.raises(ProxmoxUnreachable) as info:
            await c.get("/nodes")
    assert len(calls) == 3
    assert calls[1] - calls[0] >= 0.05 and calls[2] - calls[1] >= 0.1  # 0.05 * 2**n
    assert "after 3 attempt(s)" in str(info.value) and "pve-a (inv:7)" in str(info.value)


async def test_writes_are_not_retried_and_http_errors_typed() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        return httpx.Response(500, json={"data": None, "errors": {"vmid": "already exists"}})

    async with ProxmoxClient(target(max_retries=3), transport=httpx.MockTransport(handler)) as c:
        with pytest.raises(ProxmoxHTTPError) as info:
            await c.post("/nodes/pve1/qemu", data={"vmid": 100})
    assert calls == ["POST"] and info.value.status == 500
    assert "already exists" in str(info.value)


async def test_non_json_and_missing_data_are_http_errors() -> None:
    async with ProxmoxClient(
        target(), transport=httpx.MockTransport(lambda r: httpx.Response(200, text="<html>"))
    ) as c:
        with pytest.raises(ProxmoxHTTPError, match="not JSON"):
            await c.get("/nodes")
    body = json.dumps({"result": 1})
    async with ProxmoxClient(
        target(), transport=httpx.MockTransport(lambda r: httpx.Response(200, text=body))
    ) as c:
        with pytest.raises(ProxmoxHTTPError, match="no 'data'"):
            await c.get("/nodes")


async def test_timeout_is_the_endpoint_timeout_and_reported() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.extensions["timeout"] == {"connect": 2.0, "read": 2.0, "write": 2.0, "pool": 2.0}
        raise httpx.ReadTimeout("read timed out")

    async with ProxmoxClient(target(max_retries=0), transport=httpx.MockTransport(handler)) as c:
        with pytest.raises(ProxmoxUnreachable, match="timed out after 1 attempt"):
            await c.get("/nodes")


async def test_real_unreachable_port() -> None:
    t = target(api_url="http://127.0.0.1:9/api2/json", host="127.0.0.1", port=9, max_retries=0)
    async with ProxmoxClient(t) as c:
        with pytest.raises(ProxmoxUnreachable) as info:
            await c.get("/nodes")
    assert "127.0.0.1:9" in str(info.value)
