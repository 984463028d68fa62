"""Issue 39 section 2 (backend): the NetBox token and the Proxmox credentials go only where the rows say.

- C1 scheme: the inventory row has an explicit scheme, https by default; old rows keep what they did.
- C2 retargeting: a PUT that moves an endpoint needs its secret again (422 naming the field).
- C3 retiring: `POST /hv/endpoints/{id}/retire` disables and wipes credentials, idempotent.
- Hosts: link-local, unspecified, mapped and numeric forms are refused (`endpoints/hosts.py`).

Trap servers on loopback (`traps.py`) record what reaches them.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hvsync_backend.db.models import HvEndpoint, InventoryEndpoint
from hvsync_backend.db.session import make_engine, upgrade_to_head
from hvsync_backend.endpoints import hosts
from hvsync_backend.endpoints.service import get_hv_targets, get_inventory_target
from sqlalchemy import select, text
from support import HV, INV
from traps import http_answer, trap

NB_TOKEN = "nbtoken0123456789abcdef0123456789abcdef"
NB_KEY = "keyid77"


def _inventory(port: int, **overrides: object) -> dict[str, object]:
    return {
        "name": "netbox",
        "ip_address": "127.0.0.1",
        "domain": "",
        "port": port,
        "token_version": 2,
        "token": NB_TOKEN,
        "token_key": NB_KEY,
        "verify_ssl": False,
        **overrides,
    }


# --- C1: scheme ---------------------------------------------------------------------------------------


def test_scheme_defaults_to_https_and_is_returned(backend, auth) -> None:
    c = backend.client
    row = c.post("/inventory/endpoint", headers=auth, json={**INV, "port": 8000}).json()
    assert row["scheme"] == "https"
    assert c.get("/inventory/endpoint", headers=auth).json()[0]["scheme"] == "https"
    assert get_inventory_target(backend.context.registry).url == "https://netbox.example.com:8000"
    r = c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={"scheme": "http", "token": "tok-2"})
    assert r.status_code == 200 and r.json()["scheme"] == "http"
    assert get_inventory_target(backend.context.registry).url == "http://netbox.example.com:8000"
    r = c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={"scheme": None, "enabled": True})
    assert r.json()["scheme"] == "http"  # null keeps the stored scheme, as every omitted field


def test_scheme_refused_unless_http_or_https(backend, auth) -> None:
    r = backend.client.post("/inventory/endpoint", headers=auth, json={**INV, "scheme": "ftp"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "scheme"]


def test_https_on_a_non_443_port_never_sends_the_token_in_clear(backend, auth) -> None:
    """Before: no scheme and a port other than 443/8443 meant plain http, token and all."""
    with trap() as t:
        c = backend.client
        assert c.post("/inventory/endpoint", headers=auth, json=_inventory(t.port)).status_code == 201
        body = c.get("/extras/bootstrap-status", headers=auth).json()
    assert body["ok"] is False and body["inventory_url"] == f"https://127.0.0.1:{t.port}"
    assert t.connections >= 1 and t.received[:1] == b"\x16"  # a TLS handshake record reached it
    assert NB_TOKEN.encode() not in t.received and b"Authorization" not in t.received


def test_http_scheme_sends_the_token_because_the_row_says_so(backend, auth) -> None:
    with trap(lambda _: http_answer("200 OK", b'{"netbox-version": "4.7.3", "plugins": {}}')) as t:
        c = backend.client
        c.post("/inventory/endpoint", headers=auth, json=_inventory(t.port, scheme="http"))
        c.get("/extras/bootstrap-status", headers=auth)
    assert f"Authorization: Bearer nbt_{NB_KEY}.{NB_TOKEN}" in t.text


def test_migration_keeps_what_old_rows_did(tmp_path: Path) -> None:
    """Rows stored before 0004 had no scheme: https on 443/8443, else http. They keep exactly that."""
    from alembic import command
    from hvsync_backend.db.session import alembic_config

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    command.upgrade(alembic_config(engine), "0003")
    with engine.begin() as conn:
        for i, (port, scheme) in enumerate([(443, None), (8443, None), (8000, None), (80, "https")]):
            conn.execute(
                text(
                    "INSERT INTO inventory_endpoints (id, singleton, name, ip_address, domain, port, scheme, "
                    "token_version, verify_ssl, enabled, updated_at) "
                    "VALUES (:id, :id, '', '192.0.2.1', '', :port, :scheme, 2, 1, 1, 0)"
                ),
                {"id": i + 1, "port": port, "scheme": scheme},
            )
    upgrade_to_head(engine)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT port, scheme FROM inventory_endpoints ORDER BY id")).all()
    assert [tuple(r) for r in rows] == [(443, "https"), (8443, "https"), (8000, "http"), (80, "https")]
    engine.dispose()


# --- C2: retargeting ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [{"domain": "other.example.com"}, {"ip_address": "192.0.2.99"}, {"port": 8443}, {"scheme": "http"}],
)
def test_inventory_retarget_without_the_token_is_a_422_and_writes_nothing(backend, auth, change) -> None:
    c = backend.client
    row = c.post("/inventory/endpoint", headers=auth, json=INV).json()
    r = c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={**change, "verify_ssl": True})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "token"]
    assert next(iter(change)) in r.json()["detail"][0]["msg"]
    assert c.get("/inventory/endpoint", headers=auth).json()[0] == row  # nothing half-written
    r = c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={**change, "token": "tok-new"})
    assert r.status_code == 200, r.text
    assert get_inventory_target(backend.context.registry).headers["Authorization"].endswith(".tok-new")


def test_inventory_same_target_needs_no_token(backend, auth) -> None:
    """The plugin pushes whole bodies: unchanged (or only differently written) targets are no move."""
    c = backend.client
    row = c.post("/inventory/endpoint", headers=auth, json=INV).json()
    same = {k: v for k, v in INV.items() if k not in ("token", "token_key")}
    same["domain"] = "NetBox.Example.com."
    r = c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={**same, "enabled": False})
    assert r.status_code == 200 and r.json()["enabled"] is False


def test_hv_retarget_needs_its_secret_and_drops_what_was_not_resent(backend, auth) -> None:
    c = backend.client
    row = c.post(
        "/hv/endpoints",
        headers=auth,
        json={**HV, "access_methods": ["token", "password"], "password": "pw-old"},
    ).json()
    for change in ({"domain": "pve2.example.com"}, {"ip_address": "192.0.2.21"}, {"port": 8007}):
        r = c.put(f"/hv/endpoints/{row['id']}", headers=auth, json=change)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "token_value"]  # the first access method's
    assert c.get("/hv/endpoints", headers=auth).json()[0] == row
    r = c.put(f"/hv/endpoints/{row['id']}", headers=auth, json={"port": 8007, "token_value": "pve-new"})
    assert r.status_code == 200 and r.json()["port"] == 8007
    assert r.json()["has_token_value"] is True and r.json()["has_password"] is False
    [target] = get_hv_targets(backend.context.registry)
    assert (target.token_value, target.password) == ("pve-new", None)  # the old password never goes there
    pw = c.post("/hv/endpoints", headers=auth, json={**HV, "token_value": None, "password": "p"}).json()
    r = c.put(f"/hv/endpoints/{pw['id']}", headers=auth, json={"domain": "x.example.com"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "password"]
    # Nothing stored: nothing can leak, so a move needs nothing.
    bare = c.post("/hv/endpoints", headers=auth, json={**HV, "token_value": None}).json()
    assert c.put(f"/hv/endpoints/{bare['id']}", headers=auth, json={"port": 1}).status_code == 200
    # Revocation without credentials (the plugin's duplicate handling) is no move.
    r = c.put(
        f"/hv/endpoints/{row['id']}", headers=auth, json={"enabled": False, "allow_template_builds": False}
    )
    assert r.status_code == 200 and r.json()["has_token_value"] is True


def test_retarget_without_secret_sends_nothing_to_the_new_target(backend, auth) -> None:
    answer = http_answer("200 OK", b'{"netbox-version": "4.7.3", "plugins": {}}')
    with trap(lambda _: answer) as old, trap(lambda _: answer) as new:
        c = backend.client
        row = c.post("/inventory/endpoint", headers=auth, json=_inventory(old.port, scheme="http")).json()
        r = c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={"port": new.port})
        assert r.status_code == 422
        c.get("/extras/bootstrap-status", headers=auth)
        assert new.connections == 0 and NB_TOKEN in old.text
        hv = c.post(
            "/hv/endpoints",
            headers=auth,
            json={**HV, "ip_address": "127.0.0.1", "port": old.port, "scheme": "http", "max_retries": 0},
        ).json()
        r = c.put(f"/hv/endpoints/{hv['id']}", headers=auth, json={"port": new.port})
        assert r.status_code == 422
        c.get("/hv/nodes/", headers=auth)
    assert new.connections == 0 and new.received == b""
    assert HV["token_value"] in old.text


# --- C3: retire ----------------------------------------------------------------------------------------


def test_retire_disables_and_wipes_credentials_idempotently(backend, auth) -> None:
    c = backend.client
    row = c.post(
        "/hv/endpoints", headers=auth, json={**HV, "password": "pw-x", "allow_template_builds": True}
    ).json()
    for _ in range(2):
        r = c.post(f"/hv/endpoints/{row['id']}/retire", headers=auth)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["enabled"] is False and body["allow_template_builds"] is False
        assert body["has_password"] is False and body["has_token_value"] is False
        assert "password" not in body and "token_value" not in body
    with backend.context.session_factory() as session:
        stored = session.scalars(select(HvEndpoint)).one()
        assert stored.password_enc is None and stored.token_value_enc is None
    assert get_hv_targets(backend.context.registry) == []
    assert c.get("/hv/nodes/", headers=auth).json() == {"endpoints": []}
    r = c.post("/hv/endpoints/4242/retire", headers=auth)
    assert r.status_code == 404 and "4242" in r.json()["detail"]
    assert c.post(f"/hv/endpoints/{row['id']}/retire").status_code == 401


# --- hosts ---------------------------------------------------------------------------------------------

REFUSED_HOSTS = [
    ("ip_address", "169.254.169.254"),
    ("ip_address", "169.254.0.1"),
    ("ip_address", "fe80::1"),
    ("ip_address", "fd00:ec2::254"),
    ("ip_address", "0.0.0.0"),
    ("ip_address", "0.1.2.3"),
    ("ip_address", "::"),
    ("ip_address", "::ffff:127.0.0.1"),
    ("ip_address", "::ffff:169.254.169.254"),
    ("ip_address", "::127.0.0.1"),
    ("ip_address", "64:ff9b::a9fe:a9fe"),
    ("ip_address", "fe80::1%eth0"),
    ("ip_address", "224.0.0.1"),
    ("ip_address", "255.255.255.255"),
    ("domain", "169.254.169.254"),
    ("domain", "[fd00:ec2::254]"),
    ("domain", "[::ffff:127.0.0.1]"),
    ("domain", "2130706433"),
    ("domain", "127.1"),
    ("domain", "0x7f.1"),
    ("domain", "0177.0.0.1"),
    ("domain", "0x7f000001"),
    ("domain", "metadata.10"),
]
ALLOWED_HOSTS = [
    ("ip_address", "127.0.0.1"),
    ("ip_address", "::1"),
    ("ip_address", "10.1.2.3"),
    ("ip_address", "fd00::1"),
    ("domain", "localhost"),
    ("domain", "pve-1.example.com"),
    ("domain", "192.0.2.7"),
    ("domain", "host1.example.com."),
]


@pytest.mark.parametrize(("field", "value"), REFUSED_HOSTS)
def test_hostile_hosts_are_refused_naming_the_field(backend, auth, field: str, value: str) -> None:
    c = backend.client
    other = {"ip_address": "", "domain": "ok.example.com"} if field == "ip_address" else {"ip_address": ""}
    r = c.post("/hv/endpoints", headers=auth, json={**HV, **other, field: value})
    assert r.status_code == 422, (value, r.text)
    assert [e["loc"] for e in r.json()["detail"]] == [["body", field]]
    r = c.post("/inventory/endpoint", headers=auth, json={**INV, **other, field: value})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", field]
    assert c.get("/hv/endpoints", headers=auth).json() == []
    assert c.get("/inventory/endpoint", headers=auth).json() == []


@pytest.mark.parametrize(("field", "value"), ALLOWED_HOSTS)
def test_ordinary_and_loopback_hosts_are_kept(backend, auth, field: str, value: str) -> None:
    r = backend.client.post("/hv/endpoints", headers=auth, json={**HV, "ip_address": "", field: value})
    assert r.status_code == 201, r.text


#: The plugin's corpus of hostile backend URLs (loaded, not copied). Its "server-side request forgery"
#: group: each URL's host is refused as an endpoint host; its "_loopback_allowed" group: each host is
#: kept. Every other group: the text after the scheme, given as an endpoint host, is refused, except
#: those that are plain hosts once the URL around them is gone (the plugin refuses them for URL syntax).
CORPUS = json.loads(
    (Path(__file__).resolve().parents[2] / "netbox-hvsync" / "tests" / "hostile-urls.json").read_text()
)
SSRF_GROUP = "server-side request forgery"
PLAIN_HOSTS_ONCE_UNWRAPPED = {"host", "fd00::1", "evil.example", "host.example."}


def _host_part(url: str) -> str:
    for scheme in ("https://", "http://"):
        if url.startswith(scheme):
            return url[len(scheme) :]
    return url


def _hostname(url: str) -> str:
    return (urlsplit(url).hostname or "") if "://" in url else url


CORPUS_HOSTS = sorted(
    {
        _host_part(u)
        for key, urls in CORPUS.items()
        if not key.startswith("_") and key != SSRF_GROUP
        for u in urls
    }
    - PLAIN_HOSTS_ONCE_UNWRAPPED
)
SSRF_HOSTS = sorted({_hostname(u) for u in CORPUS.get(SSRF_GROUP, [])})
LOOPBACK_HOSTS = sorted({_hostname(u) for u in CORPUS.get("_loopback_allowed", [])})


@pytest.mark.parametrize("value", CORPUS_HOSTS)
def test_hostile_url_corpus_hosts_are_refused(value: str) -> None:
    for check in (hosts.check_domain_text, hosts.check_ip_text):
        with pytest.raises(ValueError):
            check(value)


@pytest.mark.parametrize("value", SSRF_HOSTS)
def test_ssrf_corpus_hosts_are_refused(value: str) -> None:
    assert SSRF_HOSTS, "the corpus lost its SSRF group"
    with pytest.raises(hosts.HostRefused):
        hosts.check_domain_text(value)
    with pytest.raises(hosts.HostRefused):
        hosts.check_ip_text(value)


@pytest.mark.parametrize("value", LOOPBACK_HOSTS)
def test_loopback_corpus_hosts_are_kept(value: str) -> None:
    assert hosts.check_domain_text(value) == value


def test_stored_rows_from_before_the_rule_are_not_dialled(backend, auth) -> None:
    """A row written before the host rule existed is checked again when the client connects."""
    c = backend.client
    c.post("/inventory/endpoint", headers=auth, json=INV)
    c.post("/hv/endpoints", headers=auth, json={**HV, "scheme": "http", "max_retries": 2})
    with backend.context.session_factory() as session:
        session.execute(text("UPDATE hv_endpoints SET ip_address = '169.254.169.254'"))
        session.execute(text("UPDATE inventory_endpoints SET ip_address = '169.254.169.254', domain = ''"))
        session.commit()
        assert session.scalars(select(InventoryEndpoint)).one().ip_address == "169.254.169.254"
    r = c.get("/hv/nodes/", headers=auth)
    error = r.json()["endpoints"][0]["error"]
    assert error["kind"] == "unreachable" and "refused to connect" in error["detail"]
    assert "link-local" in error["detail"] and "attempt" not in error["detail"]  # not retried
    body = c.get("/extras/bootstrap-status", headers=auth).json()
    assert body["ok"] is False and "169.254.169.254" in body["problems"][0]["detail"]
    assert "link-local" in body["problems"][0]["detail"]
