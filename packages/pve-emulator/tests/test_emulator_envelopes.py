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
