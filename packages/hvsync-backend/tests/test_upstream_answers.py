"""Issue 39 section 2 (backend): what comes back from NetBox and Proxmox is bounded and swept, and names
are resolved once per connection with every address checked.

Trap servers on loopback (`traps.py`) answer huge or secret-laden bodies and record what reached them;
a resolver the test controls (`endpoints.hosts.lookup`) answers link-local addresses for a name.
"""

from __future__ import annotations

import json
import logging

import pytest
from hvsync_backend.config import Settings
from hvsync_backend.endpoints import hosts
from support import HV
from traps import http_answer, streamed_answer, trap

CAP = 1_048_576  # the smallest cap the settings allow
HUGE = 40 * 1024 * 1024
NB_TOKEN = "nbtoken0123456789abcdef0123456789abcdef"
PLANTED = ("DBPW-planted-71c2", "CLIENTSECRET-planted-88ab", "SESSIONTOKEN-planted-4d4d")


@pytest.fixture
def settings(database_url, tmp_path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        bcrypt_rounds=4,
        netbox_max_answer_bytes=CAP,
        proxmox_max_answer_bytes=CAP,
    )


def _netbox(c, auth, port: int, **overrides) -> None:
    body = {
        "name": "netbox",
        "domain": "",
        "ip_address": "127.0.0.1",
        "port": port,
        "scheme": "http",
        "token_version": 1,
        "token": NB_TOKEN,
        "verify_ssl": False,
        **overrides,
    }
    r = c.post("/inventory/endpoint", headers=auth, json=body)
    assert r.status_code == 201, r.text


def _proxmox(c, auth, port: int, **overrides) -> int:
    body = {**HV, "ip_address": "127.0.0.1", "port": port, "scheme": "http", "max_retries": 0, **overrides}
    r = c.post("/hv/endpoints", headers=auth, json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


# --- size caps -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "streamed"])
def test_a_huge_proxmox_answer_is_cut_at_the_cap(backend, auth, declared: bool) -> None:
    def answer(_: bytes):
        if declared:
            return http_answer("200 OK", b'{"data": "' + b"x" * HUGE + b'"}')
        return streamed_answer(HUGE)

    with trap(answer) as t:
        _proxmox(backend.client, auth, t.port)
        r = backend.client.get("/hv/nodes/", headers=auth)
    assert r.status_code == 502, r.text
    error = r.json()["endpoints"][0]["error"]
    assert error["kind"] == "http" and f"{CAP}-byte limit" in error["detail"]
    assert "HVSYNC_PROXMOX_MAX_ANSWER_BYTES" in error["detail"]
    assert len(r.content) < 10_000  # nothing of the body was relayed
    assert t.sent < HUGE / 2, t.sent  # reading stopped: the trap could not write the rest


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "streamed"])
def test_a_huge_netbox_answer_is_cut_at_the_cap(backend, auth, declared: bool) -> None:
    def answer(_: bytes):
        if declared:
            return http_answer("200 OK", b'{"x": "' + b"x" * HUGE + b'"}')
        return streamed_answer(HUGE)

    with trap(answer) as t:
        _netbox(backend.client, auth, t.port)
        body = backend.client.get("/extras/bootstrap-status", headers=auth).json()
    assert body["ok"] is False
    detail = body["problems"][0]["detail"]
    assert f"{CAP}-byte limit" in detail and "HVSYNC_NETBOX_MAX_ANSWER_BYTES" in detail
    assert t.sent < HUGE / 2, t.sent


def test_answers_below_the_cap_are_read_whole(backend, auth) -> None:
    nodes = [{"node": f"n{i}", "status": "online", "pad": "y" * 900} for i in range(1000)]
    payload = json.dumps({"data": nodes}).encode()
    assert 0.5 * CAP < len(payload) < CAP
    with trap(lambda _: http_answer("200 OK", payload)) as t:
        _proxmox(backend.client, auth, t.port)
        r = backend.client.get("/hv/nodes/", headers=auth)
    assert r.status_code == 200 and len(r.json()["endpoints"][0]["data"]) == 1000


def test_the_caps_are_settings_with_sane_bounds() -> None:
    assert Settings().netbox_max_answer_bytes == Settings().proxmox_max_answer_bytes == 32 * 1024 * 1024
    with pytest.raises(ValueError):
        Settings(netbox_max_answer_bytes=1000)


# --- upstream error text ---------------------------------------------------------------------------------


def test_proxmox_error_text_is_swept_before_it_reaches_bodies_and_logs(backend, auth, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    errors = {"db_password": PLANTED[0], "detail": f"client_secret={PLANTED[1]} session_token: {PLANTED[2]}"}
    body = json.dumps({"data": None, "errors": errors}).encode()
    with trap(lambda _: http_answer(f"500 failed client_secret={PLANTED[1]}", body)) as t:
        _proxmox(backend.client, auth, t.port)
        r = backend.client.get("/hv/nodes/", headers=auth)
    assert t.connections == 1
    detail = r.json()["endpoints"][0]["error"]["detail"]
    assert "HTTP 500" in detail and "[redacted]" in detail
    for secret in PLANTED:
        assert secret not in r.text and secret not in caplog.text


def test_netbox_error_text_is_swept_before_it_reaches_bodies_and_logs(backend, auth, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    detail = f"database down: db_password={PLANTED[0]} client_secret={PLANTED[1]}"
    body = json.dumps({"detail": detail, "session_token": PLANTED[2]}).encode()
    with trap(lambda _: http_answer("400 Bad Request", body, {"Content-Type": "application/json"})) as t:
        _netbox(backend.client, auth, t.port)
        r = backend.client.get("/extras/bootstrap-status", headers=auth)
    assert t.connections >= 1
    problem = r.json()["problems"][0]["detail"]
    assert "db_password=[redacted]" in problem and "client_secret=[redacted]" in problem
    for secret in PLANTED:
        assert secret not in r.text and secret not in caplog.text


# --- resolution: once per connection, every address checked -------------------------------------------


def _resolver(answers: dict[str, list[str]], asked: list[str]) -> hosts.Lookup:
    async def lookup(host: str, port: int) -> list[str]:
        asked.append(host)
        return answers[host]

    return lookup


@pytest.mark.parametrize(
    "addresses", [["169.254.169.254"], ["127.0.0.1", "169.254.169.254"], ["::ffff:127.0.0.1"], ["0.0.0.0"]]
)
def test_a_name_resolving_to_a_refused_address_is_never_dialled(
    backend, auth, monkeypatch, addresses
) -> None:
    """The stored text is a fine name; what it resolves to at connect time (DNS rebinding) decides. A
    loopback trap among the answers proves nothing was sent to any of them."""
    asked: list[str] = []
    monkeypatch.setattr(hosts, "lookup", _resolver({"rebind.test": addresses}, asked))
    with trap(lambda _: http_answer("200 OK", b"{}")) as t:
        c = backend.client
        _proxmox(c, auth, t.port, ip_address="", domain="rebind.test")
        _netbox(c, auth, t.port, ip_address="", domain="rebind.test")
        error = c.get("/hv/nodes/", headers=auth).json()["endpoints"][0]["error"]
        problem = c.get("/extras/bootstrap-status", headers=auth).json()["problems"][0]["detail"]
    assert t.connections == 0 and t.received == b""
    assert "refused to connect" in error["detail"] and "rebind.test resolves to" in error["detail"]
    assert "refused to connect" in problem and "rebind.test resolves to" in problem
    assert "rebind.test" in asked


def test_a_name_resolving_to_loopback_is_dialled_at_the_checked_address(backend, auth, monkeypatch) -> None:
    """The connection goes to the address the check saw (the name itself is never handed to another
    resolver), and the request still names the host."""
    asked: list[str] = []
    monkeypatch.setattr(
        hosts, "lookup", _resolver({"nb.test": ["127.0.0.1"], "pve.test": ["127.0.0.1"]}, asked)
    )
    with trap(lambda _: http_answer("200 OK", b'{"data": []}')) as t:
        c = backend.client
        _proxmox(c, auth, t.port, ip_address="", domain="pve.test")
        _netbox(c, auth, t.port, ip_address="", domain="nb.test")
        assert c.get("/hv/nodes/", headers=auth).json()["endpoints"][0]["ok"] is True
        c.get("/extras/bootstrap-status", headers=auth)
    assert f"Host: pve.test:{t.port}" in t.text and f"Host: nb.test:{t.port}" in t.text
    assert {"nb.test", "pve.test"} <= set(asked)


def test_netbox_over_tls_through_the_checked_connections() -> None:
    """The checked network backend connects to the resolved address and TLS still runs against the
    name: a self-signed server answers with verification off and is refused with it on."""
    import asyncio

    from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig
    from hvsync_backend.inventory.dial import CheckedNetworkBackend
    from hvsync_backend.inventory.errors import NetBoxError
    from pve_emulator.testing import running_emulator

    async def ask(url: str, verify: bool) -> NetBoxError:
        config = NetBoxConfig(url=url, auth_header="Token abcdefabcdef0123", verify_ssl=verify, timeout=5)
        async with NetBoxClient(config) as nb:
            assert isinstance(nb._http._transport._pool._network_backend, CheckedNetworkBackend)
            with pytest.raises(NetBoxError) as info:
                await nb.get("status/")
            return info.value

    with running_emulator("demo", tls=True) as emu:
        url = emu.url.replace("127.0.0.1", "localhost")
        assert url.startswith("https://localhost:")
        assert asyncio.run(ask(url, False)).status == 404  # TLS done, the emulator answered
        refused = asyncio.run(ask(url, True))
        assert refused.status is None and "CERTIFICATE_VERIFY_FAILED" in refused.detail
