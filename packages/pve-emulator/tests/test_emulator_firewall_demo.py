"""Demo cluster firewall and datacenter options, and nested generic collections (group rules, ipset entries)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pve_emulator.testing import running_emulator


@pytest.fixture(scope="module")
def api() -> Iterator[httpx.Client]:
    """A private demo emulator: the test adds rules."""
    with running_emulator(task_duration=0.01) as pve:
        headers = {"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"}
        with httpx.Client(base_url=pve.api_url, headers=headers, timeout=10) as client:
            yield client


def _data(resp: httpx.Response):
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def test_demo_firewall_and_options(api: httpx.Client) -> None:
    options = _data(api.get("/cluster/firewall/options"))
    assert options["enable"] == 1 and options["policy_in"] == "DROP"
    groups = _data(api.get("/cluster/firewall/groups"))
    # sorted by name, one digest for the whole list, as pve-firewall lists them
    assert [g["group"] for g in groups] == ["mgmt", "web"] and len({g["digest"] for g in groups}) == 1
    web = _data(api.get("/cluster/firewall/groups/web"))
    assert [(r["pos"], r["dport"]) for r in web] == [(0, "443"), (1, "80")]
    assert [r["action"] for r in _data(api.get("/cluster/firewall/rules"))] == ["mgmt", "ACCEPT", "ACCEPT"]
    assert {a["name"]: a["cidr"] for a in _data(api.get("/cluster/firewall/aliases"))} == {
        "gateway": "10.10.0.1",
        "monitoring": "10.10.0.50",
    }
    assert [s["name"] for s in _data(api.get("/cluster/firewall/ipset"))] == ["mgmt-nets"]
    entries = _data(api.get("/cluster/firewall/ipset/mgmt-nets"))
    assert [e["cidr"] for e in entries] == ["10.10.0.0/24", "192.168.100.0/24"]
    datacenter = _data(api.get("/cluster/options"))
    assert datacenter["keyboard"] == "en-us" and datacenter["console"] == "html5"


def test_nested_collections_store_children(api: httpx.Client) -> None:
    assert api.post("/cluster/firewall/groups", data={"group": "db", "comment": "x"}).status_code == 200
    assert _data(api.get("/cluster/firewall/groups/db")) == []
    rule = {"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "5432", "enable": 1}
    assert api.post("/cluster/firewall/groups/db", data=rule).status_code == 200
    rules = _data(api.get("/cluster/firewall/groups/db"))
    assert [(r["pos"], r["dport"]) for r in rules] == [(0, "5432")]
    assert _data(api.get("/cluster/firewall/groups/db/0"))["action"] == "ACCEPT"
    assert api.post("/cluster/firewall/ipset/mgmt-nets", data={"cidr": "10.20.0.0/16"}).status_code == 200
    cidrs = [e["cidr"] for e in _data(api.get("/cluster/firewall/ipset/mgmt-nets"))]
    assert cidrs == ["10.10.0.0/24", "10.20.0.0/16", "192.168.100.0/24"]  # the config writer sorts them
    assert api.post("/cluster/firewall/ipset/mgmt-nets", data={"cidr": "10.20.0.0/16"}).status_code == 400
