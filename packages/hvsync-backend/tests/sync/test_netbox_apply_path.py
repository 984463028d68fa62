"""The NetBox client on the apply path: discovery, change sets, refusals, unanswered writes, batch sizes.
(The plugin's side is tested in real NetBox: packages/netbox-hvsync/tests/netbox/test_change_sets.py.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from fake_netbox import mock_client
from hvsync_backend.inventory.batching import BatchSizer
from hvsync_backend.inventory.client import NetBoxClient
from hvsync_backend.inventory.errors import NetBoxHTTPError, NetBoxUnreachable

ROUTE = "/api/plugins/hvsync/change-sets/"
OFFER = {
    "enabled": True,
    "versions": [1],
    "max_operations": 1000,
    "paths": ["virtualization/virtual-machines", "dcim/devices"],
}


class FakePlugin:
    """NetBox with the plugin's change-set route: applies, stores outcomes, can lose answers."""

    def __init__(self, offer: Any = OFFER, lose_answers: int = 0, refuse: str | None = None) -> None:
        self.offer = offer
        self.lose_answers = lose_answers
        self.refuse = refuse
        self.stored: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.next_id = 100

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        if request.url.path == ROUTE and request.method == "GET":
            if self.offer is None:
                return httpx.Response(404, json={"detail": "Not found."})
            return httpx.Response(200, json=self.offer)
        if request.url.path.startswith(ROUTE) and request.method == "GET":
            set_id = request.url.path.removeprefix(ROUTE).strip("/")
            if set_id in self.stored:
                return httpx.Response(200, json=self.stored[set_id])
            return httpx.Response(404, json={"applied": False})
        if request.url.path == ROUTE:
            return self.apply(body)
        if request.method == "POST":  # REST
            return httpx.Response(201, json=[{"id": i + 1} for i in range(len(body))])
        return httpx.Response(404, json={})

    def apply(self, body: dict[str, Any]) -> httpx.Response:
        if body["id"] in self.stored:
            return httpx.Response(200, json={**self.stored[body["id"]], "replayed": True})
        errors = [
            {"index": i, "status": 400, "errors": {"name": ["bad name"]}}
            for i, op in enumerate(body["operations"])
            if self.refuse is not None and op.get("data", {}).get("name") == self.refuse
        ]
        if errors:
            outcome = {"version": 1, "id": body["id"], "applied": False, "results": [], "errors": errors}
            return httpx.Response(400, json=outcome)
        results = []
        for i, op in enumerate(body["operations"]):
            self.next_id += 1
            results.append({"index": i, "op": op["op"], "id": op.get("id") or self.next_id})
        outcome = {"version": 1, "id": body["id"], "applied": True, "results": results, "errors": []}
        self.stored[body["id"]] = outcome
        if self.lose_answers > 0:  # committed, but the answer never reaches the client
            self.lose_answers -= 1
            raise httpx.ReadTimeout("lost", request=None)
        return httpx.Response(200, json=outcome)

    def posts(self) -> list[dict[str, Any]]:
        return [body for method, path, body in self.requests if method == "POST" and path == ROUTE]


def client(fake: FakePlugin, **overrides: Any) -> NetBoxClient:
    return mock_client(fake.handler, **overrides)


async def test_offered_paths_are_written_as_change_sets_and_others_over_rest() -> None:
    fake = FakePlugin()
    async with client(fake) as nb:
        created = await nb.bulk_create("virtualization/virtual-machines", [{"name": "a"}, {"name": "b"}])
        updated = await nb.bulk_update("dcim/devices", [{"id": 7, "status": "active"}])
        deleted = await nb.bulk_delete("dcim/devices", [9])
        rest = await nb.bulk_create("ipam/vlans", [{"vid": 5}])
    assert created == [{"id": 101}, {"id": 102}]
    assert updated == [{"id": 7}] and deleted == [None] and rest == [{"id": 1}]
    create, update, delete = fake.posts()
    assert [op["op"] for op in create["operations"]] == ["create", "create"]
    assert create["operations"][0] == {
        "op": "create",
        "path": "virtualization/virtual-machines",
        "data": {"name": "a"},
    }
    assert update["operations"] == [
        {"op": "update", "path": "dcim/devices", "id": 7, "data": {"status": "active"}}
    ]
    assert delete["operations"] == [{"op": "delete", "path": "dcim/devices", "id": 9}]
    assert len({create["id"], update["id"], delete["id"]}) == 3  # one id per batch
    discoveries = [r for r in fake.requests if r[:2] == ("GET", ROUTE)]
    assert len(discoveries) == 1  # asked once per client
    assert ("POST", "/api/ipam/vlans/", [{"vid": 5}]) in fake.requests
    assert nb.stats.created == 3 and nb.stats.updated == 1 and nb.stats.deleted == 1


@pytest.mark.parametrize(
    "offer",
    [
        None,
        {**OFFER, "enabled": False},
        {**OFFER, "versions": [2]},
        {**OFFER, "paths": []},
        ["not", "a", "map"],
    ],
)
async def test_without_a_usable_offer_every_write_is_rest(offer: Any) -> None:
    fake = FakePlugin(offer=offer)
    async with client(fake) as nb:
        assert await nb.bulk_create("virtualization/virtual-machines", [{"name": "a"}]) == [{"id": 1}]
    assert fake.posts() == []


async def test_turned_off_in_the_backend_the_plugin_is_not_even_asked() -> None:
    fake = FakePlugin()
    async with client(fake, apply_path=False) as nb:
        await nb.bulk_create("virtualization/virtual-machines", [{"name": "a"}])
    assert [path for _, path, _ in fake.requests] == ["/api/virtualization/virtual-machines/"]


async def test_a_refused_object_fails_alone_and_the_rest_lands_in_a_new_change_set() -> None:
    fake = FakePlugin(refuse="bad")
    async with client(fake) as nb:
        results = await nb.bulk_create(
            "virtualization/virtual-machines", [{"name": "a"}, {"name": "bad"}, {"name": "c"}]
        )
    assert results[0] == {"id": 101} and results[2] == {"id": 102}
    error = results[1]
    assert isinstance(error, NetBoxHTTPError) and error.status == 400
    assert "bad name" in error.detail and error.path == "/api/virtualization/virtual-machines/"
    first, second = fake.posts()
    assert len(first["operations"]) == 3 and [op["data"]["name"] for op in second["operations"]] == ["a", "c"]
    assert first["id"] != second["id"]
    assert nb.stats.created == 2


async def test_an_unanswered_change_set_is_read_back_and_never_applied_twice() -> None:
    fake = FakePlugin(lose_answers=1)
    async with client(fake) as nb:
        results = await nb.bulk_create("virtualization/virtual-machines", [{"name": "a"}, {"name": "b"}])
    assert results == [{"id": 101}, {"id": 102}]
    [sent] = fake.posts()  # read back, not sent again
    assert ("GET", f"{ROUTE}{sent['id']}/", None) in fake.requests
    assert len(fake.stored) == 1


async def test_a_change_set_that_did_not_land_is_sent_again_under_the_same_id() -> None:
    fake = FakePlugin()
    real_apply = fake.apply
    calls = {"n": 0}

    def lost_before_landing(body: dict[str, Any]) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            raise httpx.ConnectError("reset before NetBox read it", request=None)
        return real_apply(body)

    fake.apply = lost_before_landing  # type: ignore[method-assign]
    async with client(fake) as nb:
        assert await nb.bulk_create("virtualization/virtual-machines", [{"name": "a"}]) == [{"id": 101}]
    first, second = fake.posts()
    assert first["id"] == second["id"]  # a racing first attempt would be answered, not applied again


async def test_nothing_answering_at_all_is_reported_on_every_object() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == ROUTE:
            return httpx.Response(200, json=OFFER)
        raise httpx.ReadTimeout("gone", request=request)

    async with mock_client(handler) as nb:
        results = await nb.bulk_create("virtualization/virtual-machines", [{"name": "a"}, {"name": "b"}])
    assert all(isinstance(r, NetBoxUnreachable) for r in results)
    assert nb.stats.created == 0


def test_batch_sizes_follow_netbox_answer_times() -> None:
    sizer = BatchSizer(size=100, ceiling=1000, target_seconds=8.0)
    sizer.answered(100, 1.0)  # quick: double
    assert sizer.size == 200
    sizer.answered(50, 1.0)  # a short tail batch says nothing about a full one
    assert sizer.size == 200
    sizer.answered(200, 6.0)  # inside the target: keep
    assert sizer.size == 200
    sizer.answered(200, 12.0)  # slow: halve
    assert sizer.size == 100
    sizer.timed_out(100)  # no answer: a quarter
    assert sizer.size == 25
    for _ in range(10):
        sizer.answered(sizer.size, 0.1)
    assert sizer.size == 1000  # never above the ceiling
    assert sizer.take(3) == 3 and sizer.take(5000) == 1000


@pytest.mark.parametrize("apply_path", [True, False])
async def test_the_disks_of_one_vm_are_written_in_one_batch(apply_path: bool) -> None:
    """NetBox sums a VM's disks into its `disk` field inside each transaction: disks of one VM split over
    two concurrent batches leave the VM with one batch's sum (and NetBox refuses the VM's next save).
    Batches end between VMs, never inside one, on both paths; each answer still goes to its own item."""
    fake = FakePlugin(offer={**OFFER, "paths": ["virtualization/virtual-disks"]})
    # three disks per VM, the VMs' disks interleaved as a stage could list them; small batches
    disks = [
        {"virtual_machine": vm, "name": f"scsi{n}", "size": 10 * vm + n}
        for n in range(3)
        for vm in range(1, 8)
    ]
    async with client(fake, apply_chunk=4, write_chunk=4, apply_path=apply_path) as nb:
        created = await nb.bulk_create("virtualization/virtual-disks", disks)
    if apply_path:
        batches = [[op["data"] for op in body["operations"]] for body in fake.posts()]
    else:
        batches = [
            body
            for method, path, body in fake.requests
            if (method, path) == ("POST", "/api/virtualization/virtual-disks/")
        ]
    assert len(batches) > 1
    owners = [{d["virtual_machine"] for d in batch} for batch in batches]
    for vm in range(1, 8):
        assert sum(vm in batch for batch in owners) == 1, (vm, owners)  # all its disks in one batch
    assert sorted((d["virtual_machine"], d["name"]) for b in batches for d in b) == sorted(
        (d["virtual_machine"], d["name"]) for d in disks
    )
    assert len(created) == len(disks) and all(isinstance(c, dict) and c.get("id") for c in created)
    if apply_path:  # the fake numbers objects as it applies them: answer i must be the id of item i
        applied = {
            (d["virtual_machine"], d["name"]): r["id"]
            for body, outcome in zip(fake.posts(), fake.stored.values(), strict=True)
            for d, r in zip((op["data"] for op in body["operations"]), outcome["results"], strict=True)
        }
        assert [c["id"] for c in created] == [applied[(d["virtual_machine"], d["name"])] for d in disks]


def test_batches_of_other_paths_are_cut_where_the_size_says() -> None:
    from hvsync_backend.inventory.batching import batch_end, grouped_order, parent_keys

    vms = [{"name": f"vm{i}", "cluster": 1} for i in range(5)]
    keys = parent_keys("virtualization/virtual-machines", vms)
    assert keys == [None] * 5 and grouped_order(keys) == [0, 1, 2, 3, 4] and batch_end(keys, 0, 2) == 2
    updates = [{"id": i, "size": 5} for i in range(5)]  # no parent named: nothing is grouped
    keys = parent_keys("virtualization/virtual-disks", updates)
    assert grouped_order(keys) == [0, 1, 2, 3, 4] and batch_end(keys, 0, 2) == 2
    # the stage names each update's VM as read: then they are grouped like creates
    keys = parent_keys("virtualization/virtual-disks", updates, [{"id": 7}, 8, {"id": 7}, None, 8])
    assert keys == ["7", "8", "7", None, "8"] and grouped_order(keys) == [0, 2, 1, 4, 3]


def test_a_batch_never_outgrows_its_size_to_keep_a_vm_whole() -> None:
    """A change set holds at most max_operations: a VM's disks that straddle the size end the batch
    before them, and only a VM with more disks than the size gets a batch of its own that long."""
    from hvsync_backend.inventory.batching import batch_end, parent_keys

    disks = [{"virtual_machine": vm, "name": f"scsi{n}"} for vm in (1, 2, 3) for n in range(3)]
    keys = parent_keys("virtualization/virtual-disks", disks)
    assert batch_end(keys, 0, 4) == 3  # VM 2's disks would straddle 4: the batch ends after VM 1
    assert batch_end(keys, 3, 4) == 6
    assert batch_end(keys, 0, 6) == 6 and batch_end(keys, 6, 6) == 9
    assert batch_end(keys, 0, 2) == 3  # one VM alone outnumbers the size: its disks stay whole


@pytest.mark.parametrize("apply_path", [True, False])
@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
async def test_updates_and_deletes_of_one_vms_disks_share_a_batch_when_the_vm_is_named(
    apply_path: bool, method: str
) -> None:
    """An update or a delete carries no VM; the stage names it (`parents`) so one VM's disk writes do not
    run in two concurrent transactions, each writing its own sum into the VM."""
    fake = FakePlugin(offer={**OFFER, "paths": ["virtualization/virtual-disks"]})
    ids = list(range(1, 22))
    vm_of = {pk: {"id": 1 + pk % 7} for pk in ids}  # three disks per VM, interleaved
    async with client(fake, apply_chunk=4, write_chunk=4, apply_path=apply_path) as nb:
        if method == "PATCH":
            await nb.bulk_update(
                "virtualization/virtual-disks",
                [{"id": pk, "size": 5} for pk in ids],
                [vm_of[pk] for pk in ids],
            )
        else:
            await nb.bulk_delete("virtualization/virtual-disks", ids, [vm_of[pk] for pk in ids])
    if apply_path:
        batches = [[op.get("id") for op in body["operations"]] for body in fake.posts()]
    else:
        batches = [
            [item["id"] for item in body]
            for m, path, body in fake.requests
            if (m, path) == (method, "/api/virtualization/virtual-disks/")
        ]
    assert len(batches) > 1 and sorted(pk for b in batches for pk in b) == ids
    for vm in range(1, 8):
        assert sum(any(vm_of[pk]["id"] == vm for pk in batch) for batch in batches) == 1, (vm, batches)


async def test_rest_singles_of_a_summed_path_go_one_after_another() -> None:
    """NetBox refused a REST list of disks: the objects are sent one by one to find the bad one, and on a
    path NetBox sums into a parent not at once (two of one VM's disks would race for its total)."""
    in_flight, most = 0, 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, most
        body = json.loads(request.content)
        if len(body) > 1:
            return httpx.Response(400, json=[{}, {"size": ["bad"]}, {}])
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        if body[0]["name"] == "scsi1":
            return httpx.Response(400, json=[{"size": ["bad"]}])
        return httpx.Response(201, json=[{"id": 10, **body[0]}])

    disks = [{"virtual_machine": 1, "name": f"scsi{n}", "size": 8} for n in range(3)]
    async with mock_client(handler, apply_path=False) as nb:
        results = await nb.bulk_create("virtualization/virtual-disks", disks)
    assert most == 1
    assert [isinstance(r, NetBoxHTTPError) for r in results] == [False, True, False]
