"""Credential lifetimes as pve-access-control enforces them, aged with the emulator's clock.

Tickets and CSRF prevention tokens live two hours (five minutes of clock skew tolerated); a valid ticket
given as the password renews the session; API tokens and users honour ``expire`` and ``enable``.
``/version`` reports the release the emulator serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pve_emulator.auth import AUTH_GRACE, TICKET_LIFETIME, TicketSigner, fresh
from pve_emulator.clock import Clock
from pve_emulator.identity import expired
from pve_emulator.mock.release_info import RELEASES
from pve_emulator.testing import EmulatorHandle, running_emulator

LOGIN_REFUSED = {"data": None, "message": "authentication failure\n"}
AUTH_FAILED = {"data": None, "message": "Authentication failed!\n"}
CSRF_REFUSED = {"data": None, "message": "Permission denied - invalid csrf token\n"}


# --- plain values --------------------------------------------------------------------------------


def test_ticket_window_is_pves_exclusive_range() -> None:
    signer = TicketSigner(b"k" * 32)
    t0 = 1_700_000_000
    ticket = signer.issue("alice@pve", now=t0)
    assert signer.verify(ticket, now=t0 + TICKET_LIFETIME - 1) == "alice@pve"
    assert signer.verify(ticket, now=t0 + TICKET_LIFETIME) is None  # age < max_age, strictly
    assert signer.verify(ticket, now=t0 - AUTH_GRACE + 1) == "alice@pve"  # issued "in the future"
    assert signer.verify(ticket, now=t0 - AUTH_GRACE) is None
    assert (TICKET_LIFETIME, AUTH_GRACE) == (7200, 300)


def test_csrf_token_expires_with_the_ticket_window() -> None:
    signer = TicketSigner(b"k" * 32)
    t0 = 1_700_000_000
    token = signer.csrf_token("alice@pve", now=t0)
    assert token.split(":")[0] == f"{t0:08X}"
    assert signer.verify_csrf("alice@pve", token, now=t0 + TICKET_LIFETIME - 1)
    assert not signer.verify_csrf("alice@pve", token, now=t0 + TICKET_LIFETIME)
    assert not signer.verify_csrf("alice@pve", token, now=t0 - AUTH_GRACE)
    assert not signer.verify_csrf("bob@pve", token, now=t0)
    assert not signer.verify_csrf("alice@pve", "nothex:" + token.split(":")[1], now=t0)


def test_signer_follows_its_clock() -> None:
    clock = Clock(source=lambda: 1_700_000_000.0)
    signer = TicketSigner(b"k" * 32, clock=clock)
    ticket, csrf = signer.issue("alice@pve"), signer.csrf_token("alice@pve")
    assert ticket.startswith(f"PVE:alice@pve:{1_700_000_000:08X}::")
    assert clock.advance(TICKET_LIFETIME - 1) == 1_700_000_000 + TICKET_LIFETIME - 1
    assert signer.verify(ticket) == "alice@pve" and signer.verify_csrf("alice@pve", csrf)
    clock.advance(1)
    assert signer.verify(ticket) is None and not signer.verify_csrf("alice@pve", csrf)
    clock.reset()
    assert clock.now() == 1_700_000_000 and signer.verify(ticket) == "alice@pve"


def test_expire_zero_means_never() -> None:
    assert not expired(0, 2_000_000_000)
    assert not expired(1_000, 1_000)  # PVE: expire < now
    assert expired(999, 1_000)
    assert fresh("0000000A", 10) and not fresh("zz", 10)


# --- over HTTP -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pve_clocked() -> Iterator[EmulatorHandle]:
    """An emulator of its own: these tests move its clock."""
    with running_emulator() as handle:
        yield handle


@pytest.fixture
def pve(pve_clocked: EmulatorHandle) -> Iterator[EmulatorHandle]:
    pve_clocked.clock.reset()
    yield pve_clocked
    pve_clocked.clock.reset()


def _login(pve: EmulatorHandle, username: str, password: str) -> httpx.Response:
    return httpx.post(
        pve.api_url + "/access/ticket", data={"username": username, "password": password}, timeout=10
    )


def _session(pve: EmulatorHandle) -> dict[str, str]:
    response = _login(pve, pve.user, pve.password)
    assert response.status_code == 200, response.text
    return response.json()["data"]


def _get(pve: EmulatorHandle, path: str, ticket: str) -> httpx.Response:
    return httpx.get(pve.api_url + path, cookies={"PVEAuthCookie": ticket}, timeout=10)


def _post(pve: EmulatorHandle, path: str, session: dict[str, str], **data: Any) -> httpx.Response:
    return httpx.post(
        pve.api_url + path,
        data=data,
        cookies={"PVEAuthCookie": session["ticket"]},
        headers={"CSRFPreventionToken": session["CSRFPreventionToken"]},
        timeout=10,
    )


def _root(pve: EmulatorHandle) -> httpx.Client:
    return httpx.Client(
        base_url=pve.api_url,
        timeout=10,
        headers={"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"},
    )


def _token_get(pve: EmulatorHandle, tokenid: str, secret: str, path: str = "/nodes") -> httpx.Response:
    return httpx.get(
        pve.api_url + path, headers={"Authorization": f"PVEAPIToken={tokenid}={secret}"}, timeout=10
    )


def _stamp(ticket: str) -> int:
    return int(ticket.split("::")[0].rsplit(":", 1)[1], 16)


def test_ticket_is_valid_at_1h59m_and_refused_at_2h01m(pve: EmulatorHandle) -> None:
    session = _session(pve)
    pve.clock.advance(119 * 60)
    nodes = _get(pve, "/nodes", session["ticket"])
    assert nodes.status_code == 200
    assert sorted(n["node"] for n in nodes.json()["data"]) == sorted(pve.state.nodes)
    pve.clock.advance(2 * 60)
    refused = _get(pve, "/nodes", session["ticket"])
    assert refused.status_code == 401 and refused.json() == AUTH_FAILED


def test_renewal_with_the_ticket_as_password_issues_a_fresh_ticket(pve: EmulatorHandle) -> None:
    first = _session(pve)
    pve.clock.advance(3600)
    renewed = _login(pve, pve.user, first["ticket"])
    assert renewed.status_code == 200
    second = renewed.json()["data"]
    assert second["username"] == pve.user and second["ticket"] != first["ticket"]
    assert _stamp(second["ticket"]) - _stamp(first["ticket"]) in range(3600, 3603)
    assert abs(_stamp(second["ticket"]) - pve.clock.now()) < 2
    assert renewed.cookies["PVEAuthCookie"] == second["ticket"]
    pve.clock.advance(3700)  # the first ticket is 2h01m old now, the renewed one 1h01m
    assert _get(pve, "/nodes", first["ticket"]).json() == AUTH_FAILED
    assert _get(pve, "/nodes", second["ticket"]).status_code == 200


def test_an_expired_ticket_cannot_be_renewed(pve: EmulatorHandle) -> None:
    session = _session(pve)
    pve.clock.advance(TICKET_LIFETIME + 60)
    refused = _login(pve, pve.user, session["ticket"])
    assert refused.status_code == 401 and refused.json() == LOGIN_REFUSED
    assert "set-cookie" not in refused.headers


def test_a_ticket_renews_only_its_own_user_unless_it_is_roots(pve: EmulatorHandle) -> None:
    with _root(pve) as root:
        assert root.post("/access/users", data={"userid": "renew@pve", "password": "renew-pass"}).is_success
        assert root.post("/access/users", data={"userid": "other@pve", "password": "other-pass"}).is_success
    user_ticket = _login(pve, "renew@pve", "renew-pass").json()["data"]["ticket"]
    assert _login(pve, "other@pve", user_ticket).json() == LOGIN_REFUSED
    root_ticket = _session(pve)["ticket"]
    as_other = _login(pve, "other@pve", root_ticket)  # PVE: root@pam may create tickets for others
    assert as_other.status_code == 200 and as_other.json()["data"]["ticket"].startswith("PVE:other@pve:")


def test_csrf_token_expires_on_writes_even_with_a_fresh_ticket(pve: EmulatorHandle) -> None:
    first = _session(pve)
    pve.clock.advance(119 * 60)
    created = _post(pve, "/pools", first, poolid="csrf-early")
    assert created.status_code == 200 and "csrf-early" in pve.state.pools
    renewed = _login(pve, pve.user, first["ticket"]).json()["data"]
    pve.clock.advance(2 * 60)  # the old CSRF token is 2h01m old, the renewed ticket 2 minutes
    stale = _post(pve, "/pools", {**renewed, "CSRFPreventionToken": first["CSRFPreventionToken"]}, poolid="x")
    assert stale.status_code == 401 and stale.json() == CSRF_REFUSED and "x" not in pve.state.pools
    assert _get(pve, "/pools", renewed["ticket"]).status_code == 200  # reads need no CSRF token
    fresh_write = _post(pve, "/pools", renewed, poolid="csrf-late")
    assert fresh_write.status_code == 200 and "csrf-late" in pve.state.pools


def test_api_token_expire_is_refused_after_and_accepted_before(pve: EmulatorHandle) -> None:
    until = int(pve.clock.now()) + 3600
    with _root(pve) as root:
        made = root.post("/access/users/root@pam/token/short", data={"expire": until, "privsep": 0})
        assert made.status_code == 200 and made.json()["data"]["info"]["expire"] == until
        secret = made.json()["data"]["value"]
        listed = {t["tokenid"]: t for t in root.get("/access/users/root@pam/token").json()["data"]}
        assert listed["short"]["expire"] == until == pve.state.users["root@pam"].tokens["short"].expire
        assert root.get("/access/users/root@pam/token/short").json()["data"]["expire"] == until
    assert _token_get(pve, "root@pam!short", secret).status_code == 200
    pve.clock.advance(3601)
    refused = _token_get(pve, "root@pam!short", secret)
    assert refused.status_code == 401 and refused.json() == AUTH_FAILED
    with _root(pve) as root:  # the pre-created token never expires (expire 0)
        updated = root.put("/access/users/root@pam/token/short", data={"expire": 0})
        assert updated.status_code == 200 and updated.json()["data"]["expire"] == 0
        assert root.get("/access/users/root@pam/token/short").json()["data"]["expire"] == 0
    assert _token_get(pve, "root@pam!short", secret).status_code == 200


def test_a_token_created_already_expired_is_refused_at_once(pve: EmulatorHandle) -> None:
    with _root(pve) as root:
        made = root.post("/access/users/root@pam/token/stale", data={"expire": int(pve.clock.now()) - 1})
    assert made.status_code == 200
    assert _token_get(pve, "root@pam!stale", made.json()["data"]["value"]).json() == AUTH_FAILED


def _user_with_credentials(pve: EmulatorHandle, userid: str, **user: Any) -> tuple[str, str]:
    """A user with a password, auditor rights on / and an unseparated token; returns (tokenid, secret)."""
    with _root(pve) as root:
        assert root.post("/access/users", data={"userid": userid, "password": "pw-12345", **user}).is_success
        assert root.put("/access/acl", data={"path": "/", "roles": "PVEAuditor", "users": userid}).is_success
        made = root.post(f"/access/users/{userid}/token/ci", data={"privsep": 0})
        assert made.status_code == 200
    return f"{userid}!ci", made.json()["data"]["value"]


def test_an_expired_user_loses_password_ticket_and_tokens(pve: EmulatorHandle) -> None:
    until = int(pve.clock.now()) + 600
    tokenid, secret = _user_with_credentials(pve, "temp@pve", expire=until)
    assert pve.state.users["temp@pve"].expire == until
    login = _login(pve, "temp@pve", "pw-12345")
    assert login.status_code == 200
    ticket = login.json()["data"]["ticket"]
    assert _get(pve, "/nodes", ticket).status_code == 200
    assert _token_get(pve, tokenid, secret).status_code == 200
    pve.clock.advance(601)
    assert _login(pve, "temp@pve", "pw-12345").json() == LOGIN_REFUSED
    assert _login(pve, "temp@pve", ticket).json() == LOGIN_REFUSED  # no renewal either
    assert _get(pve, "/nodes", ticket).json() == AUTH_FAILED
    assert _token_get(pve, tokenid, secret).json() == AUTH_FAILED
    with _root(pve) as root:
        assert root.put("/access/users/temp@pve", data={"expire": 0}).is_success
    assert _login(pve, "temp@pve", "pw-12345").status_code == 200
    assert _token_get(pve, tokenid, secret).status_code == 200


def test_a_disabled_user_loses_password_ticket_and_tokens(pve: EmulatorHandle) -> None:
    tokenid, secret = _user_with_credentials(pve, "off@pve")
    ticket = _login(pve, "off@pve", "pw-12345").json()["data"]["ticket"]
    with _root(pve) as root:
        assert root.put("/access/users/off@pve", data={"enable": 0}).is_success
    assert pve.state.users["off@pve"].enable == 0
    assert _login(pve, "off@pve", "pw-12345").json() == LOGIN_REFUSED
    assert _get(pve, "/nodes", ticket).json() == AUTH_FAILED
    assert _token_get(pve, tokenid, secret).json() == AUTH_FAILED
    with _root(pve) as root:
        assert root.put("/access/users/off@pve", data={"enable": 1}).is_success
    assert _get(pve, "/nodes", ticket).status_code == 200
    assert _token_get(pve, tokenid, secret).status_code == 200


# --- /version ------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["8.4", "9.1"])
def test_version_reports_the_release_served(release: str) -> None:
    with running_emulator(release=release) as pve, _root(pve) as root:
        info = RELEASES[release]
        version = root.get("/version").json()["data"]
        console = pve.state.generic["/cluster/options"]["."]["console"]
        assert version == {
            "version": info.version,
            "release": release,
            "repoid": info.repoid,
            "console": console,
        }
        assert version["version"].startswith(release + ".") and pve.state.release == release
        for node in pve.state.nodes:
            assert root.get(f"/nodes/{node}/version").json()["data"] == {
                "version": info.version,
                "release": release,
                "repoid": info.repoid,
            }
            status = root.get(f"/nodes/{node}/status").json()["data"]
            assert status["pveversion"] == f"pve-manager/{info.version}/{info.repoid}"
            assert status["current-kernel"]["release"] == info.kernel and info.kernel in status["kversion"]


def test_version_leaves_console_out_when_the_datacenter_sets_none() -> None:
    with running_emulator(scenario="empty") as pve, _root(pve) as root:
        assert "console" not in pve.state.generic.get("/cluster/options", {}).get(".", {})
        assert set(root.get("/version").json()["data"]) == {"version", "release", "repoid"}
