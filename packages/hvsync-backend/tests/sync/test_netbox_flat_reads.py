"""Flat reads: a comparison read (`list_all(..., flat=True)`) comes from the plugin's rows route when the
plugin serves that path, and from NetBox's REST list otherwise, with the same query and pages.
(The plugin's side, value for value against REST, is tested in real NetBox: test_rows.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fake_netbox import mock_client
from hvsync_backend.inventory.apply_path import ApplyOffer
from hvsync_backend.inventory.client import NetBoxClient

DISCOVERY = "/api/plugins/hvsync/change-sets/"
ROWS = "/api/plugins/hvsync/rows/"
VMS = "virtualization/virtual-machines"
OFFER = {
    "enabled": True,
    "versions": [1],
    "max_operations": 1000,
    "paths": [VMS, "dcim/devices"],
    "read_paths": [VMS],
}


class FakeNetBox:
    """NetBox answering discovery, the rows route and REST lists (1,500 VMs: two pages)."""

    def __init__(self, offer: Any = OFFER, objects: int = 1500) -> None:
        self.offer = offer
        self.objects = objects
        self.reads: list[tuple[str, dict[str, str]]] = []
        self.discoveries = 0

    def handler(self, request: httpx.Request) -> httpx.Response:
        path, query = request.url.path, dict(request.url.params)
        if path == DISCOVERY:
            self.discoveries += 1
            if self.offer is None:
                return httpx.Response(404, json={"detail": "Not found."})
            return httpx.Response(200, json=self.offer)
        self.reads.append((path, query))
        flat = path.startswith(ROWS)
        offset, limit = int(query.get("offset", 0)), int(query.get("limit", 50))
        rows = [
            {"id": pk, "cluster": {"id": 1} if flat else {"id": 1, "url": "http://netbox.test/api/..."}}
            for pk in range(offset + 1, min(self.objects, offset + limit) + 1)
        ]
        return httpx.Response(200, json={"count": self.objects, "results": rows})


def client(fake: FakeNetBox, **overrides: Any) -> NetBoxClient:
    return mock_client(fake.handler, **overrides)


async def test_a_flat_read_of_a_served_path_uses_the_rows_route_with_the_same_query() -> None:
    fake = FakeNetBox()
    async with client(fake) as nb:
        rows = await nb.list_all(VMS, {"tag": "hvsync"}, fields=("id", "cluster"), flat=True)
    assert [r["id"] for r in rows] == list(range(1, 1501))
    assert rows[0]["cluster"] == {"id": 1}
    assert [(p, q["offset"]) for p, q in fake.reads] == [(f"{ROWS}{VMS}/", "0"), (f"{ROWS}{VMS}/", "1000")]
    assert all(
        q["tag"] == "hvsync" and q["fields"] == "id,cluster" and q["limit"] == "1000" for _, q in fake.reads
    )
    assert f"plugins/hvsync/rows/{VMS}/" in nb.stats.reads_by_path  # benchmarks show which route served


@pytest.mark.parametrize(
    ("offer", "overrides", "flat", "path"),
    [
        (OFFER, {}, False, VMS),  # a read that wants REST's nested objects
        (OFFER, {}, True, "ipam/vlans"),  # a path the plugin does not serve
        ({k: v for k, v in OFFER.items() if k != "read_paths"}, {}, True, VMS),  # a plugin before rows
        (None, {}, True, VMS),  # no plugin
        (OFFER, {"apply_path": False}, True, VMS),  # the backend keeps to REST
    ],
)
async def test_otherwise_the_read_is_the_rest_list(offer: Any, overrides: Any, flat: bool, path: str) -> None:
    fake = FakeNetBox(offer=offer, objects=3)
    async with client(fake, **overrides) as nb:
        rows = await nb.list_all(path, {"tag": "hvsync"}, fields=("id",), flat=flat)
    assert [r["id"] for r in rows] == [1, 2, 3]
    assert [p for p, _ in fake.reads] == [f"/api/{path}/"]


async def test_flat_and_rest_reads_of_one_list_are_cached_apart() -> None:
    fake = FakeNetBox(objects=2)
    async with client(fake) as nb:
        nb.cache_reads = True
        nb.prefetch(VMS, {"tag": "hvsync"}, fields=("id",), flat=True)
        flat = await nb.list_all(VMS, {"tag": "hvsync"}, fields=("id",), flat=True)
        rest = await nb.list_all(VMS, {"tag": "hvsync"}, fields=("id",))
        again = await nb.list_all(VMS, {"tag": "hvsync"}, fields=("id",), flat=True)
    assert flat == again and [r["id"] for r in rest] == [1, 2]
    assert [p for p, _ in fake.reads] == [
        f"{ROWS}{VMS}/",
        f"/api/{VMS}/",
    ]  # the prefetch served the flat read
    assert "url" in rest[0]["cluster"] and "url" not in flat[0]["cluster"]


async def test_a_run_asks_what_the_plugin_offers_once_and_before_its_reads() -> None:
    """`discover()` starts the question without waiting (a sync run's first request); every flat read
    then waits on that one answer instead of asking again."""
    fake = FakeNetBox(objects=2)
    async with client(fake) as nb:
        nb.cache_reads = True
        asked = nb.discover()
        assert nb.discover() is asked and not asked.done()
        rows = await asyncio.gather(
            *(
                nb.list_all(path, {"tag": "hvsync"}, fields=("id",), flat=True)
                for path in (VMS, "dcim/devices")
            )
        )
    assert fake.discoveries == 1 and asked.done()
    assert [len(r) for r in rows] == [2, 2]
    assert [p for p, _ in fake.reads] == [f"{ROWS}{VMS}/", "/api/dcim/devices/"]  # devices: not a read path


@pytest.mark.parametrize(
    ("read_paths", "expected"),
    [
        ([VMS, "users/users", "../secrets"], frozenset({VMS})),  # only paths the format knows
        ("virtualization/virtual-machines", frozenset()),  # not a list
        (None, frozenset()),
    ],
)
def test_the_offer_keeps_only_known_read_paths(read_paths: Any, expected: frozenset[str]) -> None:
    offer = ApplyOffer.from_discovery({**OFFER, "read_paths": read_paths})
    assert offer is not None and offer.read_paths == expected
