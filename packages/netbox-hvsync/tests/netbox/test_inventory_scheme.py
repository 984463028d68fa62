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


@pytest.mark.django_db
def test_the_run_page_warns_when_the_token_went_over_plain_http(ui, superuser) -> None:
    from sync_runs import finished_block, make_job, run_url

    block = finished_block()
    https_job = make_job(data=block, user=superuser)
    assert 'id="sync-run-cleartext-token"' not in ui.get(run_url(https_job)).content.decode()

    block["sync"]["preflight"]["inventory_pushes"] = {"2": {"ok": True, "status": 200, "scheme": "http"}}
    http_job = make_job(data=block, user=superuser)
    html = ui.get(run_url(http_job)).content.decode()
    warning = html.split('id="sync-run-cleartext-token"', 1)[1].split("</div>", 1)[0]
    assert "travels in clear" in warning and "inventory endpoint 2" in warning


@pytest.mark.django_db
def test_a_pending_run_warns_from_the_enabled_http_inventory_endpoint(ui, superuser) -> None:
    from netbox_hvsync.models import InventoryEndpoint
    from sync_runs import make_job, run_url

    job = make_job(status="pending", data={"sync": {"run_id": "r-2"}}, user=superuser)
    assert 'id="sync-run-cleartext-token"' not in ui.get(run_url(job)).content.decode()
    nb = InventoryEndpoint.objects.create(name="nb", domain="nb.example.net", port=8000, token_key="k")
    InventoryEndpoint.objects.filter(pk=nb.pk).update(scheme="http")
    html = ui.get(run_url(job)).content.decode()
    assert 'id="sync-run-cleartext-token"' in html and f"inventory endpoint {nb.pk}" in html
