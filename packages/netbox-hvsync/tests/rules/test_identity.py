"""SPEC 4.5 "Identity and currency rules (fail closed)", rules 1-3."""

from netbox_hvsync.rules.identity import (
    hv_row_drift,
    hv_row_is_current,
    inventory_row_drift,
    inventory_row_is_current,
    inventory_row_is_ours,
    locate_hv_row,
)
from netbox_hvsync.rules.records import HvEndpointRecord, InventoryEndpointRecord

INV = InventoryEndpointRecord(
    pk=1,
    name="nb",
    domain="netbox.example",
    ip_address="10.0.0.1/24",
    port=443,
    token_version=2,
    verify_ssl=True,
)


def test_inventory_identity_domain_else_ip_plus_port() -> None:
    """Rule 1: "resolved target equals (domain, else ip_address) plus port, on both sides"."""
    assert inventory_row_is_ours(INV, {"domain": "NETBOX.example.", "ip_address": "192.0.2.9", "port": 443})
    assert not inventory_row_is_ours(INV, {"domain": "netbox.example", "port": 8443})
    assert not inventory_row_is_ours(INV, {"domain": "", "ip_address": "10.0.0.1", "port": 443}), (
        "domain wins"
    )
    ip_only = InventoryEndpointRecord(pk=1, name="nb", ip_address="10.0.0.1/24", port=443)
    assert inventory_row_is_ours(ip_only, {"domain": "", "ip_address": "10.0.0.1", "port": "443"})


def test_inventory_identity_fails_closed() -> None:
    """Rule 1: "both sides must resolve a host and a parseable port. Identity is read from the plugin
    model, never from the push body" (the push body's loopback substitute never matches)."""
    no_host = InventoryEndpointRecord(pk=1, name="nb", domain="", ip_address=None, port=443)
    assert not inventory_row_is_ours(no_host, {"domain": "", "ip_address": "127.0.0.1", "port": 443})
    assert not inventory_row_is_ours(INV, {"domain": "netbox.example", "port": None})
    assert not inventory_row_is_ours(INV, {"domain": "netbox.example", "port": "https"})
    assert not inventory_row_is_ours(INV, {"port": 443})


def test_inventory_currency() -> None:
    """Rule 2: "verify_ssl and token_version both equal the model's; an absent value counts as drifted.
    name is never compared." """
    row = {"name": "totally different", "verify_ssl": True, "token_version": 2, "scheme": "https"}
    assert inventory_row_is_current(INV, row)
    assert inventory_row_drift(INV, {**row, "verify_ssl": False}) == ["verify_ssl"]
    assert inventory_row_drift(INV, {**row, "token_version": 1}) == ["token_version"]
    assert inventory_row_drift(INV, {**row, "scheme": "http"}) == ["scheme"]  # C1
    assert inventory_row_drift(INV, {}) == ["verify_ssl", "token_version", "scheme"]
    assert inventory_row_drift(INV, {"verify_ssl": 1, "token_version": True, "scheme": "https"}) == [
        "verify_ssl",
        "token_version",
    ]


HV = HvEndpointRecord(
    pk=7,
    name="pve",
    domain="pve.example",
    port=8006,
    username="root@pam",
    access_methods=("token",),
    verify_ssl=False,
    enabled=True,
    allow_template_builds=False,
    timeout=15,
    max_retries=2,
    retry_backoff=0.5,
)
CURRENT = {
    "id": 3,
    "name": "whatever (inv:7)",
    "domain": "pve.example",
    "ip_address": "",
    "port": 8006,
    "username": "root@pam",
    "access_methods": ["token"],
    "verify_ssl": False,
    "enabled": True,
    "allow_template_builds": False,
    "timeout": 15,
    "max_retries": 2,
    "retry_backoff": 0.5,
    "site_slug": "elsewhere",
    "tenant_slug": "someone",
}


def test_hv_row_located_by_exact_suffix() -> None:
    """Rule 3: "Hv row located by the exact (inv:<plugin_pk>) suffix, exactly one row; duplicates fail
    closed." """
    rows = [{"id": 1, "name": "a (inv:17)"}, {"id": 2, "name": "(inv:7) b"}, {"id": 3, "name": "c (inv:7)"}]
    found = locate_hv_row(7, rows)
    assert found.status == "found" and found.row is not None and found.row["id"] == 3
    assert locate_hv_row(8, rows).status == "unregistered"
    dup = locate_hv_row(7, [*rows, {"id": 4, "name": "d (inv:7)"}])
    assert dup.status == "duplicate" and dup.row is None and [r["id"] for r in dup.matches] == [3, 4]


def test_hv_row_current_and_metadata_excluded() -> None:
    """Rule 3: current requires the same resolved target and equal enabled, allow_template_builds,
    username, access_methods, verify_ssl, timeout, max_retries, retry_backoff. "Site and tenant metadata are
    excluded." """
    assert hv_row_is_current(HV, CURRENT)
    for key, value in [
        ("enabled", False),
        ("allow_template_builds", True),
        ("username", "other@pve"),
        ("access_methods", ["password"]),
        ("verify_ssl", True),
        ("timeout", 30),
        ("max_retries", 5),
        ("retry_backoff", 1.0),
        ("port", 8007),
        ("domain", "other.example"),
    ]:
        drift = hv_row_drift(HV, {**CURRENT, key: value})
        assert drift == (["target"] if key in ("port", "domain") else [key]), key


def test_hv_missing_policy_keys_count_as_stale() -> None:
    """Rule 3: "Missing policy keys count as stale." """
    for key in (
        "enabled",
        "allow_template_builds",
        "username",
        "access_methods",
        "verify_ssl",
        "timeout",
        "max_retries",
        "retry_backoff",
    ):
        row = {k: v for k, v in CURRENT.items() if k != key}
        assert hv_row_drift(HV, row) == [key]
    assert hv_row_drift(HV, {**CURRENT, "retry_backoff": 0.5000}) == []
    assert hv_row_drift(HV, {**CURRENT, "timeout": 15.0}) == ["timeout"]
