"""SPEC 2.3 / 4.3 endpoint registry: singleton, fields, defaults, partial PUT, validation naming the field."""

from __future__ import annotations

from hvsync_backend.db.models import HvEndpoint, InventoryEndpoint
from hvsync_backend.endpoints.service import get_hv_targets, get_inventory_target
from sqlalchemy import select
from support import HV, INV


def test_inventory_singleton_lifecycle(backend, auth) -> None:
    c = backend.client
    assert c.get("/inventory/endpoint", headers=auth).json() == []
    r = c.post("/inventory/endpoint", headers=auth, json=INV)
    assert r.status_code == 201
    row = r.json()
    assert row == {
        "id": row["id"],
        "name": "netbox",
        "ip_address": "192.0.2.10",
        "domain": "netbox.example.com",
        "port": 8000,
        "scheme": "https",
        "token_version": 2,
        "verify_ssl": False,
        "enabled": True,
        "has_token": True,
        "has_token_key": True,
    }
    r = c.post("/inventory/endpoint", headers=auth, json={**INV, "name": "second"})
    assert r.status_code == 409 and f"PUT /inventory/endpoint/{row['id']}" in r.json()["detail"]
    assert len(c.get("/inventory/endpoint", headers=auth).json()) == 1


def test_inventory_put_keeps_credentials_and_merges(backend, auth) -> None:
    c = backend.client
    row = c.post("/inventory/endpoint", headers=auth, json=INV).json()
    r = c.put(
        f"/inventory/endpoint/{row['id']}",
        headers=auth,
        json={"verify_ssl": True, "token_version": 1, "token": "", "token_key": None},
    )
    assert r.status_code == 200
    assert r.json()["verify_ssl"] is True and r.json()["token_version"] == 1 and r.json()["port"] == 8000
    target = get_inventory_target(backend.context.registry)
    assert target is not None and target.headers == {"Authorization": "Token tok-secret-1"}
    c.put(
        f"/inventory/endpoint/{row['id']}", headers=auth, json={"token": "tok-secret-2", "token_version": 2}
    )
    target = get_inventory_target(backend.context.registry)
    assert target.headers == {"Authorization": "Bearer nbt_keyid1.tok-secret-2"}
    assert target.url == "https://netbox.example.com:8000"  # https unless the row says http
    assert "tok-secret-2" not in repr(target)
    assert c.put("/inventory/endpoint/999", headers=auth, json={"port": 1}).status_code == 404


def test_inventory_validation_names_the_field(backend, auth) -> None:
    c = backend.client
    cases = [
        ({k: v for k, v in INV.items() if k != "port"}, "port"),
        ({**INV, "port": 70000}, "port"),
        ({**INV, "ip_address": "not-an-ip"}, "ip_address"),
        ({**INV, "domain": "http://x/y"}, "domain"),
        ({**INV, "token_version": 3}, "token_version"),
    ]
    for body, field in cases:
        r = c.post("/inventory/endpoint", headers=auth, json=body)
        assert r.status_code == 422, body
        assert any(e["loc"][-1] == field for e in r.json()["detail"]), r.text
    r = c.post("/inventory/endpoint", headers=auth, json={"port": 8000})
    assert r.status_code == 422 and "ip_address or domain" in r.text
    assert c.get("/inventory/endpoint", headers=auth).json() == []  # nothing half-written
    row = c.post("/inventory/endpoint", headers=auth, json=INV).json()
    r = c.put(f"/inventory/endpoint/{row['id']}", headers=auth, json={"ip_address": "", "domain": ""})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "ip_address"]
    assert c.get("/inventory/endpoint", headers=auth).json()[0]["domain"] == "netbox.example.com"


def test_hv_create_defaults_and_free_text_names(backend, auth) -> None:
    c = backend.client
    r = c.post("/hv/endpoints", headers=auth, json=HV)
    assert r.status_code == 201
    row = r.json()
    assert row["name"] == "pve-a (inv:7)" and row["access_methods"] == ["token"]
    assert (row["timeout"], row["max_retries"], row["retry_backoff"]) == (15, 2, 0.5)
    assert row["enabled"] is True and row["allow_template_builds"] is False and row["scheme"] == "https"
    assert row["has_token_value"] is True and row["has_password"] is False
    assert "token_value" not in row and "password" not in row
    pw = c.post(
        "/hv/endpoints",
        headers=auth,
        json={
            "name": "pve-a (inv:7)",
            "domain": "pve.example.com",
            "port": 8006,
            "username": "sync@pve",
            "password": "pw-1",
        },
    )
    assert pw.status_code == 201 and pw.json()["access_methods"] == ["password"]
    names = [e["name"] for e in c.get("/hv/endpoints", headers=auth).json()]
    assert names == ["pve-a (inv:7)", "pve-a (inv:7)"]  # duplicates are the plugin's to detect


def test_hv_put_partial_revocation_keeps_credentials(backend, auth) -> None:
    c = backend.client
    row = c.post("/hv/endpoints", headers=auth, json={**HV, "allow_template_builds": True}).json()
    r = c.put(
        f"/hv/endpoints/{row['id']}", headers=auth, json={"enabled": False, "allow_template_builds": False}
    )
    assert r.status_code == 200
    after = r.json()
    assert after["enabled"] is False and after["allow_template_builds"] is False
    assert after["username"] == "root@pam" and after["has_token_value"] is True
    [target] = get_hv_targets(backend.context.registry, [row["id"]], enabled_only=False)
    assert target.token_value == "pve-token-secret"
    assert get_hv_targets(backend.context.registry) == []  # disabled: not among the enabled
    r = c.put(
        f"/hv/endpoints/{row['id']}",
        headers=auth,
        json={
            "access_methods": ["password", "token"],
            "password": "pw-2",
            "timeout": 3,
            "max_retries": 0,
            "retry_backoff": 0.1,
            "enabled": True,
        },
    )
    assert r.json()["access_methods"] == ["password", "token"]
    [target] = get_hv_targets(backend.context.registry)
    assert (target.password, target.token_value, target.timeout) == ("pw-2", "pve-token-secret", 3.0)
    assert target.api_url == "https://192.0.2.20:8006/api2/json"
    assert c.put("/hv/endpoints/4242", headers=auth, json={"enabled": False}).status_code == 404


def test_hv_validation_names_the_field(backend, auth) -> None:
    c = backend.client
    cases = [
        ({k: v for k, v in HV.items() if k != "port"}, "port"),
        ({**HV, "name": ""}, "name"),
        ({**HV, "access_methods": ["ssh"]}, "access_methods"),
        ({**HV, "access_methods": []}, "access_methods"),
        ({**HV, "username": "root"}, "username"),
        ({**HV, "token_name": "root@pam!tok"}, "token_name"),
        ({**HV, "timeout": 0}, "timeout"),
        ({**HV, "max_retries": -1}, "max_retries"),
        ({**HV, "retry_backoff": "soon"}, "retry_backoff"),
        ({**HV, "verify_ssl": "maybe"}, "verify_ssl"),
    ]
    for body, field in cases:
        r = c.post("/hv/endpoints", headers=auth, json=body)
        assert r.status_code == 422, body
        assert any(field in e["loc"] for e in r.json()["detail"]), (field, r.text)
    assert c.get("/hv/endpoints", headers=auth).json() == []


def test_unknown_ids_in_service_lookup(backend, auth) -> None:
    import pytest
    from hvsync_backend.endpoints.service import UnknownHvEndpoints

    row = backend.client.post("/hv/endpoints", headers=auth, json=HV).json()
    with pytest.raises(UnknownHvEndpoints) as info:
        get_hv_targets(backend.context.registry, [row["id"], 99])
    assert info.value.ids == [99]


def test_credentials_encrypted_at_rest(backend, auth) -> None:
    c = backend.client
    c.post("/inventory/endpoint", headers=auth, json=INV)
    c.post("/hv/endpoints", headers=auth, json={**HV, "password": "pw-plain-xyz"})
    with backend.context.session_factory() as session:
        inv = session.scalars(select(InventoryEndpoint)).one()
        hv = session.scalars(select(HvEndpoint)).one()
    assert inv.token_enc and inv.token_enc.startswith("gAAAAA") and "tok-secret-1" not in inv.token_enc
    assert hv.password_enc and "pw-plain-xyz" not in hv.password_enc
