"""The inventory endpoint's explicit scheme (C1): migration 0005 keeps what existing rows did (https
only on 443/8443), new rows default to https, and the form and REST API take and show it."""

from __future__ import annotations

from importlib import import_module

import pytest
from support import API


@pytest.mark.django_db
def test_migration_0005_sets_existing_rows_from_their_port() -> None:
    from django.apps import apps
    from netbox_hvsync.models import InventoryEndpoint

    ports = {"tls": 443, "alt-tls": 8443, "plain": 8000, "eighty": 80}
    for name, port in ports.items():
        InventoryEndpoint.objects.create(name=name, domain=f"{name}.example.net", port=port, token_key="k")
    assert set(InventoryEndpoint.objects.values_list("scheme", flat=True)) == {"https"}  # the new default

    migration = import_module("netbox_hvsync.migrations.0005_inventoryendpoint_scheme")
    migration.scheme_from_port(apps, None)

    got = dict(InventoryEndpoint.objects.values_list("name", "scheme"))
    assert got == {"tls": "https", "alt-tls": "https", "plain": "http", "eighty": "http"}


@pytest.mark.django_db
def test_rest_defaults_to_https_and_refuses_an_unknown_scheme_by_name(api) -> None:
    body = {"name": "nb", "domain": "nb.example.net", "port": 8000, "token_key": "k", "token": "s" * 40}
    created = api.post(f"{API}inventory-endpoints/", body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["scheme"]["value"] == "https"

    refused = api.patch(created.json()["url"], {"scheme": "ftp"}, format="json")
    assert refused.status_code == 400
    assert set(refused.json()) == {"scheme"}

    changed = api.patch(created.json()["url"], {"scheme": "http"}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["scheme"]["value"] == "http"


@pytest.mark.django_db
def test_the_edit_form_takes_the_scheme(ui) -> None:
    from netbox_hvsync.models import InventoryEndpoint

    form = {"name": "nb-form", "domain": "nb.example.net", "port": "8080", "scheme": "http"}
    form |= {"token_version": "2", "token_key": "k", "token": "s" * 40, "enabled": "on", "verify_ssl": "on"}
    answer = ui.post("/plugins/hvsync/inventory-endpoints/add/", form)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert InventoryEndpoint.objects.get(name="nb-form").scheme == "http"
    detail = ui.get(InventoryEndpoint.objects.get(name="nb-form").get_absolute_url())
    assert b"HTTP (token in clear)" in detail.content
