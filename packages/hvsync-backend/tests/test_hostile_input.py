"""Input the store and the wire cannot carry is refused at the edge with a 422 naming the field (issue 12).

Each case here answered 500 before: `"²".isdigit()` is true but `int("²")` fails, and a NetBox token
with non-ASCII letters was stored and then broke every request that had to put it in a header.
"""

from __future__ import annotations

import pytest
from fake_netbox import FakeNetBox
from hvsync_backend.db.models import InventoryEndpoint
from hvsync_backend.endpoints.schemas import check_header_secret
from hvsync_backend.errors import FieldError as OptionError
from hvsync_backend.sync.options import SyncOptions
from hvsync_backend.sync.parse import nics as parse_nics
from hvsync_backend.wire.numbers import decimal
from sqlalchemy import select
from support import HV, INV, parse_stream

NOT_DECIMAL = ["²", "\u0663", "\uff11", "1²", "-1", "+1", "1.0", "0x10", "", " ", "1 2", "9" * 31]


@pytest.mark.parametrize("text", NOT_DECIMAL)
def test_decimal_refuses_what_int_or_the_store_cannot_take(text: str) -> None:
    assert decimal(text) is None


def test_decimal_reads_ascii_digits_within_range() -> None:
    assert decimal(" 0042 ") == 42 and decimal(7) == 7 and decimal(True) is None
    assert decimal("100", low=100, high=999) == 100 and decimal("99", low=100) is None
    assert decimal("1000", high=999) is None and decimal("9" * 30) == int("9" * 30)


@pytest.mark.parametrize("value", ["²", "1,²", "0", "2147483648", "99999999999999999999999"])
def test_endpoint_ids_outside_the_id_range_are_a_422(backend, auth, value: str) -> None:
    c = backend.client
    r = c.get("/hv/nodes/", headers=auth, params={"hv_endpoint_ids": value})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", "hv_endpoint_ids"]
    r = c.get("/dcim/devices/create/stream", headers=auth, params={"hv_endpoint_ids": value})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", "hv_endpoint_ids"]


@pytest.mark.parametrize("vmid", ["²", "\u0661\u0660\u0660", "99", "1000000000", "1e3"])
def test_selected_vm_sync_refuses_a_vmid_it_cannot_use(backend, auth, vmid: str) -> None:
    r = backend.client.post("/sync/individual/vm", headers=auth, params={"vmid": vmid})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", "vmid"]


@pytest.mark.parametrize(
    ("field", "value"), [("token", "tökén-secret"), ("token", "tok en"), ("token_key", "kéy")]
)
def test_netbox_token_that_a_header_cannot_carry_is_refused(backend, auth, field: str, value: str) -> None:
    c = backend.client
    r = c.post("/inventory/endpoint", headers=auth, json={**INV, field: value})
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [["body", field]]
    assert value not in r.text  # the error names the field, never echoes the secret
    assert c.get("/inventory/endpoint", headers=auth).json() == []  # nothing written
    row = c.post("/inventory/endpoint", headers=auth, json=INV).json()
    r = c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={field: value})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", field]
    r = c.get("/extras/bootstrap-status", headers=auth)
    assert r.status_code == 200, r.text


def test_proxmox_token_value_must_be_header_safe_but_a_password_may_be_unicode(backend, auth) -> None:
    c = backend.client
    r = c.post("/hv/endpoints", headers=auth, json={**HV, "token_value": "pvé-token"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "token_value"]
    r = c.post("/hv/endpoints", headers=auth, json={**HV, "password": "pässwort-ü"})
    assert r.status_code == 201, r.text


def test_a_stored_non_ascii_token_is_reported_not_a_500(backend, auth) -> None:
    """Rows stored before the API refused such tokens: bootstrap-status says what is wrong."""
    c = backend.client
    c.post("/inventory/endpoint", headers=auth, json=INV)
    registry = backend.context.registry
    with registry.session_factory() as session:
        row = session.scalars(select(InventoryEndpoint)).one()
        row.token_enc = registry.cipher.encrypt("tökén")
        session.commit()
    r = c.get("/extras/bootstrap-status", headers=auth)
    assert r.status_code != 500, r.text
    assert "not ASCII" in r.text and "tökén" not in r.text


def test_header_secret_check() -> None:
    assert check_header_secret("") is None and check_header_secret("abc-._~+/=") == "abc-._~+/="
    for bad in ("a b", "a\tb", "é", "\u200b"):
        with pytest.raises(ValueError):
            check_header_secret(bad)


def test_proxmox_config_numbers_in_other_scripts_are_ignored_not_fatal() -> None:
    nics = parse_nics(
        "qemu",
        {"net0": "virtio=AA:BB:CC:DD:EE:01,bridge=vmbr0,tag=²,mtu=\u0661\u0665\u0660\u0660,trunks=2;²;5"},
    )
    assert [(n.tag, n.mtu, n.trunks) for n in nics] == [(None, None, (2, 5))]


def test_bootstrap_status_reports_an_unusable_inventory_endpoint_as_a_problem(backend, auth) -> None:
    """`skipped` is only for a backend without an inventory endpoint (SPEC 4.3); a disabled or tokenless
    one used to read `ok: true, skipped` too, and the repair page hid it."""
    c = backend.client
    none = c.get("/extras/bootstrap-status", headers=auth).json()
    assert none["ok"] is True and none["skipped"] is True and none["reason"] == "no_inventory_session"
    tokenless = {k: v for k, v in INV.items() if k not in ("token", "token_key")}
    row = c.post("/inventory/endpoint", headers=auth, json=tokenless).json()
    body = c.get("/extras/bootstrap-status", headers=auth).json()
    assert body["ok"] is False and body["skipped"] is False and "token" in body["detail"]
    assert body["reason"] == "inventory_endpoint_unusable"
    assert body["problems"][0]["detail"] == body["detail"]
    c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={"enabled": False})
    body = c.get("/extras/bootstrap-status", headers=auth).json()
    assert body["ok"] is False and body["detail"] == "the inventory endpoint is disabled"


# Found by the schemathesis run over every operation (test_schemathesis.py).

NOT_A_BRANCH_SCHEMA_ID = ["\u00b9", "br\u00e5nch", "\u0663\u0661", "a b", "a.b", "x" * 65]


@pytest.mark.parametrize("value", NOT_A_BRANCH_SCHEMA_ID)
def test_branch_schema_id_that_a_header_cannot_carry_is_a_422(backend, auth, value: str) -> None:
    """`str.isalnum` accepted "¹" and "å": the id reached the X-NetBox-Branch header and failed there
    (a 500 on the custom-field reconcile, an internal error on the streams)."""
    c = backend.client
    field = ["query", "inventory_branch_schema_id"]
    for method, route in [
        ("GET", "/dcim/devices/create/stream"),
        ("GET", "/full-update/stream"),
        ("POST", "/extras/custom-fields/reconcile"),
        ("POST", "/sync/individual/cluster"),
    ]:
        r = c.request(method, route, headers=auth, params={"inventory_branch_schema_id": value})
        assert r.status_code == 422, (route, r.text)
        assert r.json()["detail"][0]["loc"] == field, route
    with pytest.raises(OptionError) as info:
        SyncOptions.from_query({"inventory_branch_schema_id": value})
    assert info.value.field == "inventory_branch_schema_id"
    assert SyncOptions.from_query(
        {"inventory_branch_schema_id": " a1b2c3d4 "}
    ).inventory_branch_schema_id == ("a1b2c3d4")


@pytest.mark.parametrize("value", ["x" * 101, "a\x1bb", "line\nbreak", "a\u2028b"])
def test_site_name_outside_netbox_bounds_is_a_422(backend, auth, value: str) -> None:
    r = backend.client.get("/dcim/devices/create/stream", headers=auth, params={"site": value})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", "site"]
    assert SyncOptions.from_query({"site": "Zürich DC 1"}).site_name == "Zürich DC 1"


def test_endpoints_without_usable_credentials_are_a_409_not_a_502(backend, auth) -> None:
    """Nothing was sent to Proxmox, so it is not a bad gateway: the stored endpoint needs editing."""
    c = backend.client
    backend.context.netbox_transport = FakeNetBox().transport
    c.post("/inventory/endpoint", headers=auth, json=INV)
    bare = {k: v for k, v in HV.items() if k != "token_value"}
    hv = c.post("/hv/endpoints", headers=auth, json=bare).json()["id"]
    r = c.get("/hv/nodes/", headers=auth)
    assert r.status_code == 409, r.text
    assert r.json()["endpoints"][0]["error"]["kind"] == "auth" and "no usable credentials" in r.text
    r = c.post("/sync/individual/cluster", headers=auth)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["source"] == "backend" and "no usable credentials" in r.json()["error"]["detail"]
    frames = parse_stream(c.get("/dcim/devices/create/stream", headers=auth).text)
    assert frames[-1].event == "complete" and frames[-1].data["ok"] is False
    assert frames[-1].data["error"]["source"] == "backend" and frames[-1].data["error"]["endpoint_id"] == hv
