"""Answers in the shapes Proxmox gives them outside plain ``/api2/json``: the ExtJS envelope, refused
request bodies, and the console calls (``vncproxy``/``termproxy``/``vncshell``, ``vncwebsocket``).

In-process (httpx's ASGI transport) except the websocket handshake, which needs a real server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pve_emulator.config import DEFAULT_TOKEN_ID, DEFAULT_TOKEN_SECRET, EmulatorConfig
from pve_emulator.server import create_app
from pve_emulator.wire import MAX_JSON_DEPTH

TOKEN = {"Authorization": f"PVEAPIToken={DEFAULT_TOKEN_ID}={DEFAULT_TOKEN_SECRET}"}


class InProcess:
    """A fresh demo emulator answered in-process, with a synchronous request helper."""

    def __init__(self) -> None:
        self.app = create_app(EmulatorConfig(response_cache=False))
        self.loop = asyncio.new_event_loop()

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://pve") as client:
                return await client.request(method, url, **kwargs)

        return self.loop.run_until_complete(go())


@pytest.fixture(scope="module")
def pve() -> Iterator[InProcess]:
    emulator = InProcess()
    yield emulator
    emulator.loop.close()


# -- ExtJS envelope ---------------------------------------------------------------------------------


def test_extjs_success_carries_data_and_success_1(pve: InProcess) -> None:
    json_answer = pve.request("GET", "/api2/json/nodes/pve1/qemu", headers=TOKEN)
    extjs = pve.request("GET", "/api2/extjs/nodes/pve1/qemu", headers=TOKEN)
    assert extjs.status_code == 200
    body = extjs.json()
    assert body["success"] == 1
    assert body["data"] == json_answer.json()["data"]
    assert "message" not in body and "status" not in body


def test_extjs_error_is_http_200_with_success_0_message_and_status(pve: InProcess) -> None:
    answer = pve.request("GET", "/api2/extjs/nodes/pve1/qemu/999/config", headers=TOKEN)
    assert answer.status_code == 200
    body = answer.json()
    assert body == {"data": None, "message": body["message"], "status": 404, "success": 0}
    assert "999" in body["message"]


def test_extjs_parameter_error_names_the_field_in_errors(pve: InProcess) -> None:
    answer = pve.request("GET", "/api2/extjs/cluster/resources", params={"type": "bogus"}, headers=TOKEN)
    assert answer.status_code == 200
    body = answer.json()
    assert body["success"] == 0 and body["status"] == 400
    assert set(body["errors"]) == {"type"}
    assert body["message"] == "Parameter verification failed.\n"


def test_extjs_write_answers_in_the_envelope(pve: InProcess) -> None:
    answer = pve.request("POST", "/api2/extjs/pools", data={"poolid": "extjs-pool"}, headers=TOKEN)
    assert answer.status_code == 200
    assert answer.json() == {"data": None, "success": 1}
    again = pve.request("POST", "/api2/extjs/pools", data={"poolid": "extjs-pool"}, headers=TOKEN)
    assert again.status_code == 200 and again.json()["success"] == 0


def test_extjs_refused_credentials_stay_http_401(pve: InProcess) -> None:
    """pveproxy's auth handler answers before any formatter runs: a 401 is a 401 in every format."""
    bad = {"Authorization": f"PVEAPIToken={DEFAULT_TOKEN_ID}=wrong"}
    answer = pve.request("GET", "/api2/extjs/nodes", headers=bad)
    assert answer.status_code == 401
    assert answer.json()["success"] == 0


def test_extjs_failed_login_is_an_operation_answer(pve: InProcess) -> None:
    answer = pve.request("POST", "/api2/extjs/access/ticket", data={"username": "root@pam", "password": "x"})
    assert answer.status_code == 200
    assert answer.json()["success"] == 0 and answer.json()["status"] == 401


# -- request bodies ---------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 100_000])
def test_deeply_nested_json_body_is_a_400_naming_body(pve: InProcess, depth: int) -> None:
    body = '{"comment": ' + "[" * depth + "]" * depth + "}"
    answer = pve.request(
        "POST", "/api2/json/pools", content=body, headers={**TOKEN, "content-type": "application/json"}
    )
    assert answer.status_code == 400
    assert "nested deeper" in answer.json()["errors"]["body"]
    bare = pve.request("POST", "/pools", content=body, headers={**TOKEN, "content-type": "application/json"})
    assert bare.status_code == 400
    assert bare.json()["errors"][0]["field"] == "body"


def test_json_body_within_the_depth_limit_reaches_validation(pve: InProcess) -> None:
    body = json.dumps({"poolid": "nested-ok", "comment": [[["x"]]]})
    answer = pve.request(
        "POST", "/api2/json/pools", content=body, headers={**TOKEN, "content-type": "application/json"}
    )
    assert answer.status_code == 400
    assert set(answer.json()["errors"]) == {"comment"}


# -- consoles ---------------------------------------------------------------------------------------

VNC_CALLS = [
    ("/nodes/pve1/vncshell", "/nodes/pve1", True),
    ("/nodes/pve1/termproxy", "/nodes/pve1", False),
    ("/nodes/pve1/qemu/100/vncproxy", "/nodes/pve1/qemu/100", True),
    ("/nodes/pve1/qemu/100/termproxy", "/nodes/pve1/qemu/100", False),
    ("/nodes/pve1/lxc/200/vncproxy", "/nodes/pve1/lxc/200", True),
    ("/nodes/pve1/lxc/200/termproxy", "/nodes/pve1/lxc/200", False),
]


@pytest.mark.parametrize(("call", "base", "vnc"), VNC_CALLS)
def test_console_calls_answer_proxmoxs_shape_and_a_ticket_vncwebsocket_accepts(
    pve: InProcess, call: str, base: str, vnc: bool
) -> None:
    answer = pve.request("POST", f"/api2/json{call}", data={"websocket": 1} if vnc else {}, headers=TOKEN)
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    expected = {"user", "ticket", "port", "upid"} | ({"cert", "password"} if vnc else set())
    assert set(data) == expected
    assert data["user"] == DEFAULT_TOKEN_ID
    assert 5900 <= data["port"] <= 5999
    assert data["upid"].startswith("UPID:pve1:") and (
        ":vncproxy:" in data["upid"] or ":vncshell:" in data["upid"]
    )
    if vnc:
        assert data["cert"].startswith("-----BEGIN CERTIFICATE-----")
        assert data["ticket"].startswith(data["password"] + ":PVEVNC:") and len(data["password"]) == 8
    else:
        assert data["ticket"].startswith("PVEVNC:")
    ok = pve.request(
        "GET",
        f"/api2/json{base}/vncwebsocket",
        params={"port": data["port"], "vncticket": data["ticket"]},
        headers=TOKEN,
    )
    assert ok.status_code == 200 and ok.json()["data"] == {"port": str(data["port"])}
    other_port = 5900 + (data["port"] - 5899) % 100
    refused = pve.request(
        "GET",
        f"/api2/json{base}/vncwebsocket",
        params={"port": other_port, "vncticket": data["ticket"]},
        headers=TOKEN,
    )
    assert refused.status_code == 401
    assert refused.json()["message"] == "permission denied - invalid PVEVNC ticket\n"


def test_a_vm_console_always_has_a_password_a_containers_only_for_websockets(pve: InProcess) -> None:
    vm = pve.request("POST", "/api2/json/nodes/pve1/qemu/100/vncproxy", headers=TOKEN).json()["data"]
    ct = pve.request("POST", "/api2/json/nodes/pve1/lxc/200/vncproxy", headers=TOKEN).json()["data"]
    assert "password" in vm and "password" not in ct and ct["ticket"].startswith("PVEVNC:")


def test_a_vnc_ticket_lives_40_seconds_on_the_emulator_clock(pve: InProcess) -> None:
    data = pve.request("POST", "/api2/json/nodes/pve1/termproxy", headers=TOKEN).json()["data"]
    params = {"port": data["port"], "vncticket": data["ticket"]}
    pve.app.clock.advance(41)
    try:
        late = pve.request("GET", "/api2/json/nodes/pve1/vncwebsocket", params=params, headers=TOKEN)
    finally:
        pve.app.clock.advance(-41)
    assert late.status_code == 401


def test_another_users_ticket_is_refused(pve: InProcess) -> None:
    data = pve.request("POST", "/api2/json/nodes/pve1/termproxy", headers=TOKEN).json()["data"]
    ticket = pve.app.signer.issue("root@pam")
    answer = pve.request(
        "GET",
        "/api2/json/nodes/pve1/vncwebsocket",
        params={"port": data["port"], "vncticket": data["ticket"]},
        headers={"Cookie": f"PVEAuthCookie={ticket}"},
    )
    assert answer.status_code == 401  # issued to the token root@pam!hvsync, presented by root@pam


def test_vncwebsocket_upgrades_with_a_good_ticket_and_closes_normally() -> None:
    """Through a real server: the handshake is accepted (subprotocol ``binary``, as noVNC asks) and the
    server closes with 1000; a bad ticket is refused with the call's own HTTP status."""
    from urllib.parse import quote

    from pve_emulator.testing import running_emulator
    from websockets.exceptions import ConnectionClosedOK, InvalidStatus
    from websockets.sync.client import connect

    with running_emulator() as server, httpx.Client(base_url=server.api_url, timeout=10) as client:
        login = client.post("/access/ticket", data={"username": server.user, "password": server.password})
        session = login.json()["data"]
        cookie = {"Cookie": "PVEAuthCookie=" + quote(session["ticket"], safe="")}
        headers = {**cookie, "CSRFPreventionToken": session["CSRFPreventionToken"]}
        data = client.post("/nodes/pve1/qemu/100/vncproxy", data={"websocket": 1}, headers=headers).json()[
            "data"
        ]
        base = (
            f"ws://{server.host}:{server.port}/api2/json/nodes/pve1/qemu/100/vncwebsocket?port={data['port']}"
        )
        with connect(
            f"{base}&vncticket={quote(data['ticket'], safe='')}",
            additional_headers=cookie,
            subprotocols=["binary"],
        ) as ws:
            assert ws.subprotocol == "binary"
            with pytest.raises(ConnectionClosedOK) as closed:
                ws.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
        with pytest.raises(InvalidStatus) as refused:
            connect(f"{base}&vncticket=forged", additional_headers=cookie)
        assert refused.value.response.status_code == 401
