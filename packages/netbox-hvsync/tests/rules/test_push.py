"""SPEC 4.5 "Push functions return (ok, error message, HTTP status)" and the wire facts of the backend."""

import json

import pytest
from fakes import API_KEY, BASE, FakeResponse, FakeTransport, refused
from netbox_hvsync.rules.constants import HV_PUSH_TIMEOUT, INVENTORY_PUSH_TIMEOUT
from netbox_hvsync.rules.failures import APPLICATION, TRANSPORT
from netbox_hvsync.rules.push import (
    REVOCATION_BODY,
    PushResult,
    build_hv_body,
    build_inventory_body,
    hv_wire_name,
    push_hv_endpoint,
    push_inventory_endpoint,
    store_fingerprint_after_push,
)
from netbox_hvsync.rules.records import HvEndpointRecord, InventoryEndpointRecord

INV_TOKEN = "planted-netbox-token-0123456789abcdef"
HV_SECRET = "planted-proxmox-secret-0123456789"
HV_PASSWORD = "planted-proxmox-password-987"

INV = InventoryEndpointRecord(
    pk=1,
    name="netbox",
    domain="",
    ip_address="10.0.0.1/24",
    port=443,
    token_version=2,
    token_key="abcd1234",
    token=INV_TOKEN,
    verify_ssl=True,
    enabled=True,
)
HV = HvEndpointRecord(
    pk=7,
    name="pve-lab",
    domain="pve.example",
    port=8006,
    username="root@pam",
    access_methods=("token",),
    token_name="hvsync",
    token_value=HV_SECRET,
    password=HV_PASSWORD,
    allow_template_builds=True,
)


def test_inventory_body_matches_the_wire_facts() -> None:
    assert build_inventory_body(INV) == {
        "name": "netbox",
        "ip_address": "10.0.0.1",
        "domain": "",
        "port": 443,
        "scheme": "https",
        "token_version": 2,
        "token_key": "abcd1234",
        "token": INV_TOKEN,
        "verify_ssl": True,
        "enabled": True,
    }


def test_inventory_body_substitutes_loopback_without_linked_ip() -> None:
    """SPEC 2.3: "when the plugin-side record has no linked IP, a loopback address is substituted in the
    pushed IP field so the backend has something to dial"."""
    record = InventoryEndpointRecord(pk=1, name="nb", domain="NetBox.Example", ip_address=None, port=8000)
    body = build_inventory_body(record)
    assert body["ip_address"] == "127.0.0.1" and body["domain"] == "netbox.example"
    assert body["scheme"] == "https"  # C1: https unless the record says http


def test_inventory_body_carries_an_http_scheme_as_recorded() -> None:
    record = InventoryEndpointRecord(pk=1, name="nb", domain="nb.example", port=8000, scheme="http")
    assert build_inventory_body(record)["scheme"] == "http"


def test_hv_body_matches_the_wire_facts() -> None:
    """SPEC 2.3: name is `<display_name> (inv:<plugin_pk>)`; "The push body additionally carries credentials
    (password or token_value)"."""
    assert build_hv_body(HV) == {
        "name": "pve-lab (inv:7)",
        "ip_address": "",
        "domain": "pve.example",
        "port": 8006,
        "username": "root@pam",
        "access_methods": ["token"],
        "token_name": "hvsync",
        "token_value": HV_SECRET,
        "verify_ssl": True,
        "enabled": True,
        "allow_template_builds": True,
        "timeout": 15,
        "max_retries": 2,
        "retry_backoff": 0.5,
    }
    both = HvEndpointRecord(
        pk=7,
        name="x",
        domain="pve.example",
        access_methods=("password", "token"),
        token_value=HV_SECRET,
        password=HV_PASSWORD,
    )
    body = build_hv_body(both)
    assert body["password"] == HV_PASSWORD and body["token_value"] == HV_SECRET
    no_creds = build_hv_body(
        HvEndpointRecord(pk=7, name="x", domain="pve.example", access_methods=("password",))
    )
    assert "password" not in no_creds and "token_value" not in no_creds


def test_wire_name_does_not_double_the_suffix() -> None:
    assert hv_wire_name(HvEndpointRecord(pk=7, name="pve (inv:7)")) == "pve (inv:7)"
    assert hv_wire_name(HvEndpointRecord(pk=7, name="pve (inv:70)")) == "pve (inv:70) (inv:7)"


def test_result_unpacks_as_the_spec_triple() -> None:
    ok, error, status = PushResult(True, "", 201, backend_id=3)
    assert (ok, error, status) == (True, "", 201)


def test_inventory_empty_list_posts(ctx) -> None:
    """SPEC 4.5: "Inventory push: GET /inventory/endpoint; empty list gives POST"."""
    t = (
        FakeTransport()
        .on("GET", "/inventory/endpoint", FakeResponse(200, []))
        .on("POST", "/inventory/endpoint", FakeResponse(201, {"id": 4, "name": "netbox"}))
    )
    result = push_inventory_endpoint(t, ctx, INV)
    assert tuple(result) == (True, "", 201) and result.backend_id == 4
    assert t.paths() == ["GET /inventory/endpoint", "POST /inventory/endpoint"]
    post = t.calls[1]
    assert post.json == build_inventory_body(INV)
    assert post.headers["X-Service-API-Key"] == API_KEY
    assert all(c.timeout == INVENTORY_PUSH_TIMEOUT and c.allow_redirects is False for c in t.calls)
    assert post.url == BASE + "/inventory/endpoint"


def test_inventory_puts_to_first_row_by_position_never_by_name(ctx) -> None:
    """SPEC 4.5: "otherwise PUT to the first row's id (matched by position, never by name)"."""
    rows = [{"id": 9, "name": "something else"}, {"id": 2, "name": "netbox"}]
    t = (
        FakeTransport()
        .on("GET", "/inventory/endpoint", FakeResponse(200, rows))
        .on("PUT", "/inventory/endpoint/9", FakeResponse(200, {"id": 9}))
    )
    result = push_inventory_endpoint(t, ctx, INV)
    assert tuple(result) == (True, "", 200) and result.backend_id == 9
    assert t.paths()[-1] == "PUT /inventory/endpoint/9"


def test_inventory_failures_are_redacted_and_keep_the_status(ctx) -> None:
    echo = {"detail": [{"loc": ["body", "token"], "msg": "bad", "type": "x", "input": INV_TOKEN}]}
    t = (
        FakeTransport()
        .on("GET", "/inventory/endpoint", FakeResponse(200, []))
        .on("POST", "/inventory/endpoint", FakeResponse(422, echo))
    )
    ok, error, status = push_inventory_endpoint(t, ctx, INV)
    assert (ok, status) == (False, 422)
    assert error == "POST /inventory/endpoint: HTTP 422: body.token: bad"
    assert INV_TOKEN not in error and API_KEY not in error


def test_inventory_transport_and_redirect_failures(ctx) -> None:
    t = FakeTransport().on("GET", "/inventory/endpoint", refused())
    result = push_inventory_endpoint(t, ctx, INV)
    assert not result.ok and result.status is None and result.failure_kind == TRANSPORT
    assert "backend unreachable (connection)" in result.error
    t = FakeTransport().on(
        "GET", "/inventory/endpoint", FakeResponse(307, raw_text="", headers={"Location": "http://x"})
    )
    result = push_inventory_endpoint(t, ctx, INV)
    assert result.error == "GET /inventory/endpoint: redirect refused (HTTP 307)" and result.status == 307
    t = FakeTransport().on("GET", "/inventory/endpoint", FakeResponse(401, {"detail": "Invalid API key"}))
    assert tuple(push_inventory_endpoint(t, ctx, INV)) == (
        False,
        "GET /inventory/endpoint: HTTP 401: Invalid API key",
        401,
    )


def test_inventory_port_required_without_any_call(ctx) -> None:
    t = FakeTransport()
    result = push_inventory_endpoint(t, ctx, InventoryEndpointRecord(pk=3, name="x", domain="nb", port=None))
    assert not result.ok and "port is required" in result.error and t.calls == []


def hv_row(row_id: int, name: str, **extra) -> dict:
    return {"id": row_id, "name": name, "domain": "pve.example", "port": 8006, **extra}


def test_hv_no_match_posts_and_one_match_puts(ctx) -> None:
    """SPEC 4.5: "find rows whose name ends with (inv:<plugin_pk>); none gives POST; exactly one gives PUT"."""
    t = (
        FakeTransport()
        .on("GET", "/hv/endpoints", FakeResponse(200, [hv_row(1, "other (inv:70)")]))
        .on("POST", "/hv/endpoints", FakeResponse(201, {"id": 12}))
    )
    result = push_hv_endpoint(t, ctx, HV)
    assert tuple(result) == (True, "", 201) and result.backend_id == 12 and result.grant_confirmed is True
    assert t.calls[-1].json == build_hv_body(HV) and t.calls[-1].timeout == HV_PUSH_TIMEOUT
    rows = [hv_row(1, "other (inv:70)"), hv_row(5, "renamed by someone (inv:7)")]
    t = FakeTransport().on("PUT", "/hv/endpoints/5", FakeResponse(200, {"id": 5}))
    result = push_hv_endpoint(t, ctx, HV, rows=rows)
    assert tuple(result) == (True, "", 200) and result.backend_id == 5
    assert t.paths() == ["PUT /hv/endpoints/5"], "a supplied listing is reused, not fetched again"


def test_hv_duplicates_get_credential_free_revocations_even_after_a_failure(ctx) -> None:
    """SPEC 4.5: "If several rows claim one suffix, a credential-free revocation PUT (enabled false,
    allow_template_builds false) is attempted on every identifiable duplicate even if an earlier one fails;
    the sync is then refused and every failed row reported." """
    rows = [hv_row(3, "a (inv:7)"), hv_row(4, "b (inv:7)"), {"name": "c (inv:7)"}, hv_row(6, "d (inv:7)")]
    t = (
        FakeTransport()
        .on("PUT", "/hv/endpoints/3", FakeResponse(500, {"detail": "db locked"}))
        .on("PUT", "/hv/endpoints/4", FakeResponse(200, {"id": 4}))
        .on("PUT", "/hv/endpoints/6", refused())
    )
    result = push_hv_endpoint(t, ctx, HV, rows=rows)
    assert not result.ok and result.duplicate_claim and result.grant_confirmed is None
    assert t.paths() == ["PUT /hv/endpoints/3", "PUT /hv/endpoints/4", "PUT /hv/endpoints/6"]
    assert all(c.json == dict(REVOCATION_BODY) for c in t.calls)
    assert REVOCATION_BODY == {"enabled": False, "allow_template_builds": False}
    sent = t.everything_sent()
    assert HV_SECRET not in sent and HV_PASSWORD not in sent
    assert len(result.failed_rows) == 3
    assert "row 3: PUT /hv/endpoints/3: HTTP 500: db locked" in result.error
    assert "'c (inv:7)': no usable id" in result.error
    assert "row 6: PUT /hv/endpoints/6: backend unreachable" in result.error
    assert "4 backend rows claim (inv:7); sync refused" in result.error


def test_hv_duplicates_all_revoked_confirms_grant_false(ctx) -> None:
    """SPEC 2.6: the grant flag records "the last effective template-build grant confirmed by a successful
    push"; "A failed revocation leaves it true"."""
    rows = [hv_row(3, "a (inv:7)"), hv_row(4, "b (inv:7)")]
    t = (
        FakeTransport()
        .on("PUT", "/hv/endpoints/3", FakeResponse(200, {}))
        .on("PUT", "/hv/endpoints/4", FakeResponse(200, {}))
    )
    result = push_hv_endpoint(t, ctx, HV, rows=rows)
    assert not result.ok and result.grant_confirmed is False and result.failed_rows == ()


def test_failed_normal_push_confirms_nothing(ctx) -> None:
    revoking = HvEndpointRecord(
        pk=7,
        name="pve",
        domain="pve.example",
        allow_template_builds=False,
        template_build_grant_confirmed=True,
    )
    t = FakeTransport().on("PUT", "/hv/endpoints/5", FakeResponse(503, raw_text="<html>oops</html>"))
    result = push_hv_endpoint(t, ctx, revoking, rows=[hv_row(5, "pve (inv:7)")])
    assert not result.ok and result.grant_confirmed is None and result.failure_kind == TRANSPORT
    t = FakeTransport().on("PUT", "/hv/endpoints/5", FakeResponse(200, {}))
    result = push_hv_endpoint(t, ctx, revoking, rows=[hv_row(5, "pve (inv:7)")])
    assert result.ok and result.grant_confirmed is False


def test_hv_listing_failure(ctx) -> None:
    t = FakeTransport().on("GET", "/hv/endpoints", FakeResponse(500, {"detail": "boom"}))
    result = push_hv_endpoint(t, ctx, HV)
    assert tuple(result) == (False, "GET /hv/endpoints: HTTP 500: boom", 500)
    assert result.failure_kind == APPLICATION


def test_fingerprint_store_after_push() -> None:
    """SPEC 4.5: "A successful inventory push stores the credential fingerprint with a filtered update ...
    A database error in that write is logged, not raised"."""
    stored: list[str] = []
    logged: list[str] = []
    assert store_fingerprint_after_push(PushResult(True, "", 200), "v1:abc", stored.append, logged.append)
    assert stored == ["v1:abc"]

    def broken(_fp: str) -> None:
        raise RuntimeError("database is locked")

    assert not store_fingerprint_after_push(PushResult(True, "", 200), "v1:abc", broken, logged.append)
    assert logged == ["could not store the pushed credential fingerprint: RuntimeError"]
    assert not store_fingerprint_after_push(
        PushResult(False, "x", 500), "v1:abc", stored.append, logged.append
    )
    assert stored == ["v1:abc"]


@pytest.mark.parametrize("status", [200, 201])
def test_secrets_only_travel_in_bodies_and_headers(ctx, status) -> None:
    t = (
        FakeTransport()
        .on("GET", "/hv/endpoints", FakeResponse(200, []))
        .on("POST", "/hv/endpoints", FakeResponse(status, {"id": 1}))
    )
    push_hv_endpoint(t, ctx, HV)
    assert HV_SECRET not in t.calls[0].url and json.dumps(t.calls[0].json) == "null"


@pytest.mark.parametrize("ip", ["169.254.169.254", "::ffff:127.0.0.1", "0.0.0.0", "fd00:ec2::254"])
def test_a_refused_address_is_never_pushed(ctx, ip: str) -> None:
    """Issue 39 (SSRF): the IP an endpoint links to can change in IPAM after the endpoint was validated;
    the push refuses it by field and sends nothing (no credential reaches the backend for that target)."""
    from dataclasses import replace

    t = FakeTransport().on("GET", "/inventory/endpoint", FakeResponse(200, []))
    t.on("GET", "/hv/endpoints", FakeResponse(200, []))
    inventory = push_inventory_endpoint(t, ctx, replace(INV, ip_address=ip))
    hv = push_hv_endpoint(t, ctx, replace(HV, domain="", ip_address=ip))
    for result in (inventory, hv):
        assert not result.ok and result.failure_kind == APPLICATION and "ip_address" in result.error
    assert t.calls == []
    numeric = push_hv_endpoint(t, ctx, replace(HV, domain="0x7f.1"))
    assert not numeric.ok and "domain" in numeric.error and t.calls == []


def test_retire_posts_for_every_row_claiming_the_suffix_and_sends_no_credential(ctx) -> None:
    """C3: a deleted endpoint's backend rows are retired by suffix (never a stored id); 404 is done."""
    from netbox_hvsync.rules.push import retire_hv_rows

    rows = [
        {"id": 3, "name": "pve (inv:7)"},
        {"id": 4, "name": "other (inv:70)"},
        {"id": 5, "name": "x (inv:7)"},
    ]
    t = FakeTransport().on("GET", "/hv/endpoints", FakeResponse(200, rows))
    t.on("POST", "/hv/endpoints/3/retire", FakeResponse(200, {"id": 3, "enabled": False}))
    t.on("POST", "/hv/endpoints/5/retire", FakeResponse(404, {"detail": "gone"}))
    result = retire_hv_rows(t, ctx, 7)
    assert result.ok
    assert t.paths() == ["GET /hv/endpoints", "POST /hv/endpoints/3/retire", "POST /hv/endpoints/5/retire"]
    assert all(c.json == {} for c in t.calls if c.method == "POST")
    nothing = FakeTransport().on("GET", "/hv/endpoints", FakeResponse(200, rows[1:2]))
    assert retire_hv_rows(nothing, ctx, 7).ok and nothing.paths() == ["GET /hv/endpoints"]


def test_a_failed_retire_is_a_failed_result_to_retry(ctx) -> None:
    from netbox_hvsync.rules.push import retire_hv_rows

    t = FakeTransport().on("GET", "/hv/endpoints", FakeResponse(200, [{"id": 3, "name": "pve (inv:7)"}]))
    t.on("POST", "/hv/endpoints/3/retire", FakeResponse(503, {"detail": "busy"}))
    result = retire_hv_rows(t, ctx, 7)
    assert not result.ok and result.status == 503 and "hv endpoint 7" in result.error
    down = FakeTransport().on("GET", "/hv/endpoints", refused())
    assert not retire_hv_rows(down, ctx, 7).ok
