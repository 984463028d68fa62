"""The backend's NetBox writes against a NetBox slowed on purpose (a fault proxy delays every answer):
on both paths batch sizes shrink to NetBox's pace and every object lands exactly once."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator

import pytest
from conftest import REPO, NetBox
from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig

sys.path.insert(0, str(REPO / "tests" / "orchestration"))
from fault_proxy import Fault, FaultProxy

CHANGE_SETS = "/api/plugins/hvsync/change-sets/"
VMS = "virtualization/virtual-machines"
#: The proxy delays each write just past the client's answer target (its sizer's `target_seconds`, a quarter
#: of this), so every answer is slow; the rest of the timeout is NetBox's for the real work of four
#: concurrent 16-VM batches (7.3 s here; a 4 s timeout left 2.8 s, which a busy CI machine missed).
TIMEOUT = 10.0


@pytest.fixture
def cluster_id(netbox: NetBox) -> Iterator[int]:
    suffix = uuid.uuid4().hex[:8]
    with netbox.client() as c:
        ctype = c.post(
            "virtualization/cluster-types/", json={"name": f"slow-{suffix}", "slug": f"slow-{suffix}"}
        )
        ctype.raise_for_status()
        cluster = c.post(
            "virtualization/clusters/", json={"name": f"slow-{suffix}", "type": ctype.json()["id"]}
        )
        cluster.raise_for_status()
    yield int(cluster.json()["id"])
    with netbox.client() as c:
        vms = c.get(f"{VMS}/", params={"cluster_id": cluster.json()["id"], "limit": 1000}).json()["results"]
        if vms:
            c.request("DELETE", f"{VMS}/", json=[{"id": vm["id"]} for vm in vms])
        c.delete(f"virtualization/clusters/{cluster.json()['id']}/")
        c.delete(f"virtualization/cluster-types/{ctype.json()['id']}/")


@pytest.mark.parametrize("apply_path", [True, False], ids=["apply-path", "rest"])
async def test_a_slow_netbox_gets_smaller_batches_and_every_object_once(
    netbox: NetBox, cluster_id: int, apply_path: bool
) -> None:
    proxy = FaultProxy(netbox.url).start()
    slowed = CHANGE_SETS if apply_path else f"/api/{VMS}/"
    config = NetBoxConfig(
        url=proxy.url,
        auth_header=netbox.auth_header,
        timeout=TIMEOUT,
        apply_chunk=16,
        write_chunk=16,
        apply_path=apply_path,
    )
    names = [f"slow-{cluster_id}-{i}" for i in range(100)]
    try:
        async with NetBoxClient(config) as nb:
            sizer = nb.apply_sizer if apply_path else nb.rest_sizer
            delay = sizer.target_seconds + 0.2
            proxy.set(slowed, Fault("slow", seconds=delay, method="POST"))
            results = await nb.bulk_create(VMS, [{"name": n, "cluster": cluster_id} for n in names])
    finally:
        proxy.stop()
    assert [r for r in results if not isinstance(r, dict)] == []
    sizes = [size for size, _ in sizer.history]
    assert sizes[:4] == [16, 16, 16, 16] and max(sizes[4:]) <= 8, sizer.history  # answers > target: halved
    assert sum(sizes) == 100 and all(seconds >= delay for _, seconds in sizer.history)
    posts = [h for h in proxy.hits if h.method == "POST"]
    assert all(h.path.startswith(slowed) for h in posts) and len(posts) == len(sizes)
    landed = netbox.all(f"{VMS}/", cluster_id=cluster_id)
    assert sorted(vm["name"] for vm in landed) == sorted(names)  # each exactly once
