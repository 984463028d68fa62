"""Issue 39: endpoint hosts the backend must never dial are refused by field (REST and form), and a second
enabled inventory endpoint is refused by `enabled` (model clean, form and REST)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import API

pytestmark = pytest.mark.django_db

CORPUS = json.loads((Path(__file__).parents[1] / "hostile-urls.json").read_text())
HOSTS = ["169.254.169.254", "fe80::1", "0.0.0.0", "::", "::ffff:127.0.0.1", "fd00:ec2::254"]
NUMERIC = ["2130706433", "127.1", "0x7f.1", "017700000001"]


def _hv(**fields):
    return {"name": "pve", "username": "root@pam", "token_name": "hv", "token_value": "s" * 20, **fields}


def _inv(**fields):
    return {"name": "nb", "port": 8000, "token_key": "k", "token": "t" * 40, "scheme": "http", **fields}


@pytest.mark.parametrize("host", HOSTS + NUMERIC)
def test_a_refused_domain_names_the_field_and_writes_nothing(api, host) -> None:
    from netbox_hvsync.models import HvEndpoint, InventoryEndpoint

    for route, body in (("hv-endpoints/", _hv(domain=host)), ("inventory-endpoints/", _inv(domain=host))):
        answer = api.post(API + route, body, format="json")
        assert answer.status_code == 400, (route, host, answer.content)
        assert list(answer.json()) == ["domain"], answer.content
    assert not HvEndpoint.objects.exists() and not InventoryEndpoint.objects.exists()


@pytest.mark.parametrize("address", ["169.254.169.254/32", "fe80::1/64", "::ffff:10.0.0.1/128"])
def test_a_refused_linked_ip_names_ip_address(api, address) -> None:
    from ipam.models import IPAddress

    ip = IPAddress.objects.create(address=address)
    for route, body in (
        ("hv-endpoints/", _hv(ip_address=ip.pk)),
        ("inventory-endpoints/", _inv(ip_address=ip.pk)),
        ("backend-endpoints/", {"name": "b", "ip_address": ip.pk, "enabled": False}),
    ):
        answer = api.post(API + route, body, format="json")
        assert answer.status_code == 400, (route, answer.content)
        assert list(answer.json()) == ["ip_address"], answer.content


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "pve.example.net", "10.0.0.5"])
def test_loopback_and_ordinary_hosts_are_accepted(api, host) -> None:
    answer = api.post(API + "hv-endpoints/", _hv(domain=host), format="json")
    assert answer.status_code == 201, answer.content


def test_a_second_enabled_inventory_endpoint_is_refused_by_enabled(api, ui) -> None:
    from django.core.exceptions import ValidationError
    from netbox_hvsync.models import InventoryEndpoint

    first = api.post(API + "inventory-endpoints/", _inv(domain="nb1.example.net"), format="json")
    assert first.status_code == 201, first.content
    second = api.post(API + "inventory-endpoints/", _inv(name="nb2", domain="nb2.example.net"), format="json")
    assert second.status_code == 400 and list(second.json()) == ["enabled"], second.content
    assert "'nb' is already enabled" in second.json()["enabled"][0]

    disabled = api.post(
        API + "inventory-endpoints/", _inv(name="nb2", domain="nb2.example.net", enabled=False), format="json"
    )
    assert disabled.status_code == 201, disabled.content
    enabling = api.patch(disabled.json()["url"], {"enabled": True}, format="json")
    assert enabling.status_code == 400 and list(enabling.json()) == ["enabled"]
    assert list(InventoryEndpoint.objects.filter(enabled=True).values_list("name", flat=True)) == ["nb"]

    with pytest.raises(ValidationError) as info:
        InventoryEndpoint(name="nb3", domain="nb3.example.net", token_key="k").full_clean()
    assert set(info.value.message_dict) == {"enabled"}

    form = {"name": "nb4", "domain": "nb4.example.net", "port": "8000", "scheme": "http", "enabled": "on"}
    form |= {"token_version": "2", "token_key": "k", "token": "t" * 40, "verify_ssl": "on"}
    page = ui.post("/plugins/hvsync/inventory-endpoints/add/", form)
    assert page.status_code == 200 and "is already enabled" in page.content.decode()
    assert not InventoryEndpoint.objects.filter(name="nb4").exists()
    # editing the enabled one itself stays possible
    assert api.patch(first.json()["url"], {"port": 8001}, format="json").status_code == 200
