"""The NetBox client writes the same result on every supported release (inventory/releases.py).

The matrix in `make test` proves it against real NetBox 4.5.8, 4.6.8, 4.7.0 and 4.7.3; these tests pin the
exact requests the client sends where the releases' REST APIs differ.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig
from hvsync_backend.inventory.errors import NetBoxHTTPError
from hvsync_backend.inventory.releases import NetBoxRelease, parse_version, same_mac

AUTH = "Bearer nbt_abcdefabcdef.0123456789abcdef0123456789abcdef01234567"


class FakeNetBox:
    """Just enough of a NetBox of one release: interfaces, MAC objects, status."""

    def __init__(self, version: str, existing_macs: list[dict] | None = None, reject_mac: str = "") -> None:
        self.version = version
        self.requests: list[tuple[str, str, object]] = []
        self.macs = list(existing_macs or [])
        self.reject_mac = reject_mac
        self.next_id = 500

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/")
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, path, body if body is not None else dict(request.url.params)))
        if path == "status/":
            return httpx.Response(200, json={"netbox-version": self.version})
        if path == "dcim/mac-addresses/" and request.method == "GET":
            wanted = {int(v) for v in request.url.params.get_list("vminterface_id")}
            rows = [m for m in self.macs if m["assigned_object_id"] in wanted]
            return httpx.Response(200, json={"count": len(rows), "results": rows})
        if path == "dcim/mac-addresses/" and request.method == "POST":
            if any(item["mac_address"] == self.reject_mac for item in body):
                if len(body) > 1:
                    return httpx.Response(400, json=[{} for _ in body])
                return httpx.Response(400, json={"mac_address": ["Enter a valid MAC address."]})
            out = []
            for item in body:
                self.next_id += 1
                out.append({"id": self.next_id, **item})
            return httpx.Response(201, json=out)
        if request.method == "POST":
            out = []
            for item in body:
                self.next_id += 1
                out.append({"id": self.next_id, **item})
            return httpx.Response(201, json=out)
        return httpx.Response(200, json=body)


def client(fake: FakeNetBox) -> NetBoxClient:
    return NetBoxClient(
        NetBoxConfig(url="http://netbox.test", auth_header=AUTH, apply_path=False),
        transport=httpx.MockTransport(fake.handler),
    )


def test_versions_parse_with_suffixes() -> None:
    assert parse_version("4.6.8-Docker-3.4.1") == (4, 6, 8)
    assert parse_version("4.7.3") == (4, 7, 3)
    assert parse_version("4.²7.0") == (4, 7, 0)  # a hostile status answer is not a 500
    assert parse_version("4.7") == (4, 7, 0)
    assert NetBoxRelease.from_status({"netbox-version": "4.5.8"}).interface_mac_shortcut is False
    assert NetBoxRelease.from_status({"netbox-version": "4.7.0"}).interface_mac_shortcut is True
    assert same_mac("AA:BB:CC:00:11:22", "aa-bb-cc-00-11-22") and not same_mac("AA:BB:CC:00:11:22", None)


async def test_on_4_7_the_interface_takes_mac_address_itself() -> None:
    fake = FakeNetBox("4.7.3")
    async with client(fake) as nb:
        [made] = await nb.bulk_create(
            "virtualization/interfaces", [{"name": "net0", "mac_address": "AA:BB:CC:00:00:01"}]
        )
    assert made["mac_address"] == "AA:BB:CC:00:00:01"
    writes = [(m, p, b) for m, p, b in fake.requests if m != "GET"]
    assert writes == [
        ("POST", "virtualization/interfaces/", [{"name": "net0", "mac_address": "AA:BB:CC:00:00:01"}])
    ]


async def test_before_4_7_a_created_interface_gets_a_mac_object_made_primary() -> None:
    fake = FakeNetBox("4.5.8")
    async with client(fake) as nb:
        results = await nb.bulk_create(
            "virtualization/interfaces",
            [{"name": "net0", "mac_address": "AA:BB:CC:00:00:01"}, {"name": "net1", "mac_address": None}],
        )
    iface0, iface1 = (r["id"] for r in results)
    writes = [(m, p, b) for m, p, b in fake.requests if m != "GET"]
    assert writes[0] == ("POST", "virtualization/interfaces/", [{"name": "net0"}, {"name": "net1"}])
    assert writes[1] == (
        "POST",
        "dcim/mac-addresses/",
        [
            {
                "mac_address": "AA:BB:CC:00:00:01",
                "assigned_object_type": "virtualization.vminterface",
                "assigned_object_id": iface0,
            }
        ],
    )
    mac_id = fake.next_id
    assert writes[2] == (
        "PATCH",
        "virtualization/interfaces/",
        [{"id": iface0, "primary_mac_address": mac_id}],  # net1 was created without a MAC: nothing to set
    )
    assert iface1 != iface0
    assert len(writes) == 3


async def test_before_4_7_a_mac_change_reuses_the_interfaces_existing_mac_object() -> None:
    fake = FakeNetBox(
        "4.6.8", existing_macs=[{"id": 77, "mac_address": "AA:BB:CC:00:00:09", "assigned_object_id": 12}]
    )
    async with client(fake) as nb:
        [updated] = await nb.bulk_update(
            "virtualization/interfaces", [{"id": 12, "mac_address": "aa:bb:cc:00:00:09"}]
        )
    assert updated == {"id": 12}
    writes = [(m, p, b) for m, p, b in fake.requests if m != "GET"]
    # no interface PATCH without other fields, no new MAC object: only the primary is set to the old one
    assert writes == [("PATCH", "virtualization/interfaces/", [{"id": 12, "primary_mac_address": 77}])]
    reads = [(p, b) for m, p, b in fake.requests if m == "GET" and p == "dcim/mac-addresses/"]
    assert reads and reads[0][1]["vminterface_id"] == "12"


async def test_before_4_7_a_rejected_mac_fails_only_its_interface() -> None:
    fake = FakeNetBox("4.5.8", reject_mac="not-a-mac")
    async with client(fake) as nb:
        results = await nb.bulk_update(
            "virtualization/interfaces",
            [
                {"id": 1, "mac_address": "not-a-mac", "mtu": 1500},
                {"id": 2, "mac_address": "AA:BB:CC:00:00:02"},
            ],
        )
    assert isinstance(results[0], NetBoxHTTPError) and "MAC" in str(results[0])
    assert results[1] == {"id": 2}
    patches = [b for m, p, b in fake.requests if m == "PATCH"]
    assert patches[0] == [{"id": 1, "mtu": 1500}, {"id": 2}] or patches[0] == [{"id": 1, "mtu": 1500}]
    assert [{"id": 2, "primary_mac_address": fake.next_id}] in patches


@pytest.mark.parametrize("path", ["dcim/devices", "virtualization/virtual-machines"])
async def test_other_lists_never_ask_the_release(path: str) -> None:
    fake = FakeNetBox("4.5.8")
    async with client(fake) as nb:
        await nb.bulk_create(path, [{"name": "x"}])
    assert [p for _, p, _ in fake.requests] == [f"{path}/"]
