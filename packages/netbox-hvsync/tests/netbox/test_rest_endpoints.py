"""Connection records over REST: CRUD, write-only encrypted secrets, and the SPEC 2.6 deletion guard."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from support import API

pytestmark = pytest.mark.django_db

BACKENDS = API + "backend-endpoints/"
INVENTORIES = API + "inventory-endpoints/"
HV = API + "hv-endpoints/"

PLANTED = {
    "backend": "planted-backend-key-7f3c9a1e5b2d4f60",
    "inventory": "planted-netbox-token-0a1b2c3d4e5f6789",
    "hv_token": "planted-pve-token-secret-aa11bb22cc33",
    "hv_password": "planted-pve-password-Zq9!x",
}


def database_dump_contains(secret: str) -> list[str]:
    """Every column of the plugin's tables, and the change-log and job rows written by this test, searched."""
    hits = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND (table_name LIKE 'netbox_hvsync_%%' OR table_name IN ('core_objectchange', 'core_job'))"
        )
        for (table,) in cursor.fetchall():
            recent = {"core_objectchange": " WHERE t.time >= now()", "core_job": " WHERE t.created >= now()"}
            cursor.execute(f'SELECT row_to_json(t)::text FROM "{table}" t{recent.get(table, "")}')
            hits += [table for (row,) in cursor.fetchall() if secret in row]
    return hits


def test_backend_endpoint_crud_and_write_only_key(api):
    # disabled: saving an enabled endpoint with a new key verifies it at the backend (key adoption, SPEC 5.2);
    # that path has its own tests, this one is about storage and the REST surface
    created = api.post(
        BACKENDS,
        {
            "name": "hvsync",
            "enabled": False,
            "backend_url": "https://hvsync.example.net:8800",
            "token": PLANTED["backend"],
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["has_token"] is True and "token" not in body
    assert body["backend_url"] == "https://hvsync.example.net:8800"
    assert body["key_state"] == {"value": "pending", "label": "Pending"} and body["is_pending"] is True
    assert PLANTED["backend"] not in created.content.decode()

    from netbox_hvsync.models import BackendEndpoint

    record = BackendEndpoint.objects.get(pk=body["id"])
    assert record.token == PLANTED["backend"]
    assert record.token_ciphertext and PLANTED["backend"] not in record.token_ciphertext
    # blank and null on PATCH keep the stored key (SPEC 5.2.9)
    for blank in ("", None):
        patched = api.patch(f"{BACKENDS}{body['id']}/", {"token": blank, "port": 8801}, format="json")
        assert patched.status_code == 200, patched.content
        record.refresh_from_db()
        assert record.token == PLANTED["backend"] and record.port == 8801
    replaced = api.patch(
        f"{BACKENDS}{body['id']}/", {"token": "a-new-key-value-1234567890abcdefghijkl"}, format="json"
    )
    assert replaced.status_code == 200
    record.refresh_from_db()
    assert record.token == "a-new-key-value-1234567890abcdefghijkl"
    listing = api.get(BACKENDS)
    assert "a-new-key" not in listing.content.decode() and listing.json()["count"] == 1
    assert database_dump_contains(PLANTED["backend"]) == []
    assert database_dump_contains("a-new-key-value-1234567890abcdefghijkl") == []
    assert api.delete(f"{BACKENDS}{body['id']}/").status_code == 204


def test_backend_endpoint_validation_response(api):
    none = api.post(BACKENDS, {"name": "x"}, format="json")
    assert none.status_code == 400 and "backend_url" in none.json(), none.content
    bad = api.post(BACKENDS, {"name": "x", "backend_url": "ftp://nope"}, format="json")
    assert bad.status_code == 400 and list(bad.json()) == ["backend_url"], bad.content
    port = api.post(BACKENDS, {"name": "x", "backend_url": "http://h", "port": 70000}, format="json")
    assert port.status_code == 400 and "port" in port.json()


def test_inventory_endpoint_token_and_fingerprint_read_only(api):
    created = api.post(
        INVENTORIES,
        {
            "name": "netbox",
            "domain": "netbox.example.net",
            "port": 443,
            "token_version": 2,
            "token_key": "k3y",
            "token": PLANTED["inventory"],
            "pushed_credential_fingerprint": "forged",
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["token_version"] == {"value": 2, "label": "v2"}
    assert body["pushed_credential_fingerprint"] == "" and body["has_token"] is True
    assert PLANTED["inventory"] not in created.content.decode()
    assert database_dump_contains(PLANTED["inventory"]) == []
    # disabled: one inventory endpoint ("netbox") is enabled already, and a second may not be (issue 39)
    missing_key = api.post(
        INVENTORIES, {"name": "n2", "domain": "d", "token_version": 2, "enabled": False}, format="json"
    )
    assert missing_key.status_code == 400 and list(missing_key.json()) == ["token_key"]
    v1 = api.post(
        INVENTORIES, {"name": "n3", "domain": "d", "token_version": 1, "enabled": False}, format="json"
    )
    assert v1.status_code == 201 and v1.json()["has_token"] is False


def test_hv_endpoint_crud_filters_and_secrets(api, hv):
    created = api.post(
        HV,
        {
            "name": "pve-c",
            "domain": "pve-c.example.net",
            "username": "sync@pve",
            "access_methods": ["token", "password"],
            "token_name": "hvsync",
            "token_value": PLANTED["hv_token"],
            "password": PLANTED["hv_password"],
            "timeout": 20,
            "retry_backoff": 1.5,
            "site": hv["site"].pk,
            "template_build_grant_confirmed": True,
            "backend_id": 77,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["has_token_value"] is True and body["has_password"] is True
    assert body["access_methods"] == ["token", "password"]
    assert body["port"] == 8006 and body["max_retries"] == 2 and body["retry_backoff"] == 1.5
    assert body["template_build_grant_confirmed"] is False and body["backend_id"] is None  # read-only
    assert body["site"]["id"] == hv["site"].pk
    text = created.content.decode()
    assert PLANTED["hv_token"] not in text and PLANTED["hv_password"] not in text
    assert (
        database_dump_contains(PLANTED["hv_token"]) == []
        and database_dump_contains(PLANTED["hv_password"]) == []
    )

    from netbox_hvsync.models import HvEndpoint

    record = HvEndpoint.objects.get(pk=body["id"])
    assert record.token_value == PLANTED["hv_token"] and record.password == PLANTED["hv_password"]
    assert record.backend_name == f"pve-c (inv:{record.pk})"

    assert [r["name"] for r in api.get(f"{HV}?username=sync@pve").json()["results"]] == ["pve-c"]
    assert [r["name"] for r in api.get(f"{HV}?q=pve-b").json()["results"]] == ["pve-b"]
    assert {r["name"] for r in api.get(f"{HV}?site_id={hv['site'].pk}").json()["results"]} == {"pve-c"}

    bad = api.post(
        HV, {"name": "x", "domain": "d", "username": "u", "access_methods": ["ssh"]}, format="json"
    )
    assert bad.status_code == 400 and "access_methods" in bad.json()
    no_token_name = api.post(
        HV, {"name": "y", "domain": "d", "username": "u", "access_methods": ["token"]}, format="json"
    )
    assert no_token_name.status_code == 400 and "token_name" in no_token_name.json()
    assert api.delete(f"{HV}{body['id']}/").status_code == 204


def test_change_log_never_carries_credentials(api):
    created = api.post(
        HV,
        {
            "name": "pve-log",
            "domain": "d",
            "username": "u",
            "access_methods": ["password"],
            "password": PLANTED["hv_password"],
        },
        format="json",
    )
    assert created.status_code == 201
    from core.models import ObjectChange

    change = ObjectChange.objects.filter(changed_object_id=created.json()["id"]).latest("time")
    data = change.postchange_data
    assert data["has_password"] is True and "password_ciphertext" not in data
    assert PLANTED["hv_password"] not in json.dumps(data)


class TestDeletionGuard:
    """SPEC 2.6: while the last confirmed template-build grant is true, deletion and local toggles are refused."""

    @pytest.fixture
    def granted(self, hv):
        from netbox_hvsync.models import HvEndpoint

        HvEndpoint.objects.filter(pk=hv["endpoint"].pk).update(template_build_grant_confirmed=True)
        hv["endpoint"].refresh_from_db()
        return hv["endpoint"]

    def test_model_delete_refused(self, granted):
        from netbox_hvsync.models import HvEndpoint, HvEndpointDeletionBlocked

        with pytest.raises(HvEndpointDeletionBlocked, match="template builds"):
            granted.delete()
        with pytest.raises(HvEndpointDeletionBlocked):
            HvEndpoint.objects.filter(pk=granted.pk).delete()
        with pytest.raises(HvEndpointDeletionBlocked):
            HvEndpoint.objects.filter(pk=granted.pk).update(enabled=False)
        assert HvEndpoint.objects.filter(pk=granted.pk, enabled=True).exists()

    def test_rest_delete_refused_with_reason(self, api, granted):
        response = api.delete(f"{HV}{granted.pk}/")
        assert response.status_code == 400
        assert "template builds" in response.json()["detail"] and granted.name in response.json()["detail"]
        bulk = api.delete(HV, [{"id": granted.pk}], format="json")
        # NetBox's own bulk-error body differs by release (4.7: per-object `errors`; 4.5, 4.6: `detail`)
        assert bulk.status_code == 400 and "template builds" in json.dumps(bulk.json()), bulk.content
        toggle = api.patch(HV, [{"id": granted.pk, "allow_template_builds": False}], format="json")
        assert toggle.status_code == 400 and "enabled/allow_template_builds" in toggle.json()["detail"]
        from netbox_hvsync.models import HvEndpoint

        assert HvEndpoint.objects.filter(pk=granted.pk).exists()

    def test_single_save_and_ungranted_delete_allowed(self, api, granted, hv):
        # a normal (single) save is the path that confirms a revocation, so it is not blocked
        single = api.patch(f"{HV}{granted.pk}/", {"allow_template_builds": False}, format="json")
        assert single.status_code == 200
        assert api.delete(f"{HV}{hv['other'].pk}/").status_code == 204

    def test_ui_delete_and_bulk_toggle_refused(self, ui, granted):
        response = ui.post(
            f"/plugins/hvsync/hv-endpoints/{granted.pk}/delete/", {"confirm": True}, follow=True
        )
        assert response.status_code == 200
        assert "template builds" in response.content.decode()
        bulk = ui.post(
            "/plugins/hvsync/hv-endpoints/delete/",
            {"pk": [granted.pk], "confirm": True, "_confirm": True},
            follow=True,
        )
        assert "template builds" in bulk.content.decode()
        toggle = ui.post(
            "/plugins/hvsync/hv-endpoints/edit/",
            {"pk": [granted.pk], "enabled": "false", "_apply": True},
            follow=True,
        )
        assert "template builds" in toggle.content.decode()
        from netbox_hvsync.models import HvEndpoint

        assert HvEndpoint.objects.filter(pk=granted.pk, enabled=True).exists()
