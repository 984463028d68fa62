"""Selected-object syncs of every kind (`POST /sync/individual/{kind}`) against real NetBox.

One demo cluster, one NetBox, tests in order: each sync must write its object and what the object
depends on (cluster, the nodes it lives on, the plugin records it links to, its guest) and nothing else;
404 for an unknown object, 422 naming the missing field, the same scope parameters as the stages.
The task-history retention bound is tested at the end, on the full stage.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import Backend, NetBox, changelog_count, pve, start_backend
from pve_emulator.testing import running_emulator

ENDPOINT: dict[str, Any] = {}
SLOW_TASK = "UPID:pve3:A0000FAC:01E4C994:69548148:qmstart:100:root@pam:"
NODE_TASK = "UPID:pve2:A0000FAA:01E48BB6:69547C98:aptupdate::root@pam:"
BACKUP = "local:backup/vzdump-qemu-105-2026_01_01-00_00_00.vma.zst"


@pytest.fixture(scope="module")
def demo(netbox: NetBox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Backend]]:
    with running_emulator(scenario="demo") as emu:
        # UPIDs are unique in NetBox: this cluster's differ from the other demo modules' (pid field)
        tasks = list(emu.state.tasks.values())
        emu.state.tasks.clear()
        for task in tasks:
            parts = task.upid.split(":")
            parts[2] = "A" + parts[2][1:]
            task.upid = ":".join(parts)
            emu.state.tasks[task.upid] = task
        with netbox.client() as c:
            r = c.post(
                "plugins/hvsync/hv-endpoints/",
                json={
                    "name": "individual demo",
                    "domain": "pve.individual.example",
                    "port": 8006,
                    "username": "root@pam",
                    "token_name": "hvsync",
                    "token_value": "plugin-side-secret-value",
                    "access_methods": ["token"],
                },
            )
            assert r.status_code == 201, r.text
            ENDPOINT["pk"] = r.json()["id"]
        backend = start_backend(tmp_path_factory.mktemp("backend"))
        backend.add_inventory(netbox)
        row = backend.add_hv(emu, f"individual demo (inv:{ENDPOINT['pk']})", site_slug="individual-site")
        ENDPOINT["backend_id"] = row["id"]
        try:
            yield emu, backend
        finally:
            backend.client.__exit__(None, None, None)


def sync(backend: Backend, kind: str, **params: Any) -> Any:
    return backend.client.post(
        f"/sync/individual/{kind}", params=params, headers=backend.headers, timeout=600
    )


def ok(backend: Backend, kind: str, **params: Any) -> dict[str, Any]:
    r = sync(backend, kind, hv_endpoint_ids=ENDPOINT["backend_id"], **params)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ok"] is True and body["summary"]["failed"] == 0 and body["summary"]["deleted"] == 0
    return body


def ident() -> str:
    return f"inv{ENDPOINT['pk']}"


SITE = "individual-site"


def mine(netbox: NetBox, path: str, **params: Any) -> list[dict[str, Any]]:
    """Rows of `path` that belong to this module's endpoint (other e2e modules share the NetBox)."""
    rows = netbox.all(path, **params)

    def ids(p: str) -> set[int]:
        return {r["id"] for r in mine(netbox, p)}

    def nested(row: dict[str, Any], field: str) -> int | None:
        return (row.get(field) or {}).get("id")

    if path in ("dcim/devices", "virtualization/virtual-machines"):
        return [r for r in rows if (r.get("site") or {}).get("slug") == SITE]
    if path == "virtualization/clusters":
        return [r for r in rows if str(r["custom_fields"].get("hvsync_key") or "").startswith(ident() + "|")]
    if path in ("plugins/hvsync/clusters", "plugins/hvsync/task-history"):
        return [r for r in rows if nested(r, "endpoint") == ENDPOINT["pk"]]
    if path in ("plugins/hvsync/nodes", "plugins/hvsync/storage"):
        return [r for r in rows if nested(r, "cluster") in ids("plugins/hvsync/clusters")]
    if path == "plugins/hvsync/backups":
        return [r for r in rows if nested(r, "storage") in ids("plugins/hvsync/storage")]
    if path in ("plugins/hvsync/snapshots", "virtualization/virtual-disks"):
        return [r for r in rows if nested(r, "virtual_machine") in ids("virtualization/virtual-machines")]
    if path == "dcim/interfaces":
        return [r for r in rows if nested(r, "device") in ids("dcim/devices")]
    raise AssertionError(f"no ownership rule for {path}")


def vm_keys(netbox: NetBox) -> set[str]:
    """Every managed VM's key, whoever wrote it."""
    return {
        v["custom_fields"]["hvsync_key"] for v in netbox.all("virtualization/virtual-machines", tag="hvsync")
    }


def my_vm_keys(netbox: NetBox) -> set[str]:
    return {
        v["custom_fields"]["hvsync_key"]
        for v in mine(netbox, "virtualization/virtual-machines", tag="hvsync")
    }


def device_names(netbox: NetBox) -> set[str]:
    return {d["name"] for d in mine(netbox, "dcim/devices", tag="hvsync")}


def plugin_nodes(netbox: NetBox) -> set[str]:
    return {n["name"] for n in mine(netbox, "plugins/hvsync/nodes")}


def test_cluster_writes_the_cluster_and_its_plugin_record_only(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    _, backend = demo
    body = ok(backend, "cluster")
    [cluster] = mine(netbox, "virtualization/clusters", tag="hvsync")
    assert cluster["name"] == "hvsync-demo" and cluster["custom_fields"]["hvsync_key"] == f"{ident()}|cluster"
    assert cluster["type"]["slug"] == "proxmox-ve" and cluster["scope"]["slug"] == "individual-site"
    [hv_cluster] = mine(netbox, "plugins/hvsync/clusters")
    assert (hv_cluster["name"], hv_cluster["cluster"]["id"], hv_cluster["endpoint"]["id"]) == (
        "hvsync-demo",
        cluster["id"],
        ENDPOINT["pk"],
    )
    assert device_names(netbox) == set() and plugin_nodes(netbox) == set() and my_vm_keys(netbox) == set()
    assert [s["stage"] for s in body["stages"]] == ["devices", "storage"]
    # the same call again: nothing to write
    again = ok(backend, "cluster")
    assert again["requests"]["netbox_writes"] == 0 and again["summary"]["unchanged"] == 2


def test_storage_writes_that_storage_and_the_nodes_it_is_on(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = demo
    pve(emu, "PUT", "storage/local-lvm", {"nodes": "pve3"})
    ok(backend, "storage", storage="local-lvm")
    [storage] = mine(netbox, "plugins/hvsync/storage")
    assert (storage["name"], storage["storage_type"], storage["shared"], storage["content"]) == (
        "local-lvm",
        "lvmthin",
        False,
        ["images", "rootdir"],
    )
    assert [n["name"] for n in storage["nodes"]] == ["pve3"]
    assert device_names(netbox) == {"pve3"} and plugin_nodes(netbox) == {"pve3"}
    [node] = mine(netbox, "plugins/hvsync/nodes")
    assert node["device"]["name"] == "pve3" and node["node_id"] == 3 and node["online"] is True
    assert my_vm_keys(netbox) == set() and mine(netbox, "plugins/hvsync/backups") == []
    assert mine(netbox, "dcim/interfaces", tag="hvsync") == []


def test_node_writes_that_node_its_interfaces_and_its_cluster(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = demo
    ok(backend, "node", node="pve2")
    assert device_names(netbox) == {"pve2", "pve3"} and plugin_nodes(netbox) == {"pve2", "pve3"}
    [device] = mine(netbox, "dcim/devices", name="pve2")
    assert (
        device["custom_fields"]["hvsync_key"] == f"{ident()}|node|pve2"
        and device["status"]["value"] == "active"
    )
    ifaces = mine(netbox, "dcim/interfaces", tag="hvsync")
    want = {r["iface"] for r in pve(emu, "GET", "nodes/pve2/network") if r["iface"] != "lo"}
    assert ifaces and {i["device"]["name"] for i in ifaces} == {"pve2"}
    assert {i["name"] for i in ifaces} == want
    assert len(mine(netbox, "plugins/hvsync/storage")) == 1 and my_vm_keys(netbox) == set()


def test_snapshot_writes_the_snapshot_its_vm_and_the_vms_node(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = demo
    body = ok(backend, "snapshot", vmid=100, name="before-upgrade")
    assert my_vm_keys(netbox) == {f"{ident()}|vm|100"}
    assert device_names(netbox) == {"pve1", "pve2", "pve3"}  # VM 100 lives on pve1
    [snap] = mine(netbox, "plugins/hvsync/snapshots")
    want = emu.state.guests[100].snapshots["before-upgrade"]
    assert (snap["name"], snap["virtual_machine"]["name"]) == ("before-upgrade", "web-01")
    assert (snap["parent"], snap["vmstate"]) == (want.parent or "", bool(want.vmstate))
    assert snap["description"] == want.description.strip()
    stages = {s["stage"]: s["summary"] for s in body["stages"]}
    assert stages["vm-snapshots"]["created"] == 1 and stages["virtual-machines"]["created"] == 1
    # without a name: every snapshot of that guest
    ok(backend, "snapshot", vmid=100)
    assert {s["name"] for s in mine(netbox, "plugins/hvsync/snapshots")} == {
        "before-upgrade",
        "after-upgrade",
    }
    assert mine(netbox, "virtualization/virtual-disks", tag="hvsync") == []  # a snapshot sync is no VM sync


def test_backup_writes_the_backup_its_storage_and_its_vm(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    emu, backend = demo
    ok(backend, "backup", vmid=105, volid=BACKUP)
    [backup] = mine(netbox, "plugins/hvsync/backups")
    volume = emu.state.volumes[BACKUP]
    assert (backup["volid"], backup["vmid"], backup["storage"]["name"]) == (BACKUP, 105, "local")
    assert backup["virtual_machine"]["name"] == "cache-01" and backup["size"] == volume.size
    assert my_vm_keys(netbox) == {f"{ident()}|vm|100", f"{ident()}|vm|105"}
    assert {s["name"] for s in mine(netbox, "plugins/hvsync/storage")} == {"local-lvm", "local"}
    [local] = mine(netbox, "plugins/hvsync/storage", name="local")
    assert {n["name"] for n in local["nodes"]} == {"pve1", "pve2", "pve3"}
    # vmid only: every backup of that guest (nfs-backup holds three of VM 101)
    ok(backend, "backup", vmid=101)
    assert {b["volid"] for b in mine(netbox, "plugins/hvsync/backups", vmid=101)} == {
        v.volid for v in emu.state.volumes.values() if v.content == "backup" and v.vmid == 101
    }
    assert len(mine(netbox, "plugins/hvsync/backups")) == 4
    # that run wrote only VM 101's node; the storages keep every node they are on
    [local] = mine(netbox, "plugins/hvsync/storage", name="local")
    assert {n["name"] for n in local["nodes"]} == {"pve1", "pve2", "pve3"}


def test_task_history_writes_the_task_its_node_and_its_vm(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    _, backend = demo
    before = my_vm_keys(netbox)
    ok(backend, "task-history", upid=SLOW_TASK)
    [task] = mine(netbox, "plugins/hvsync/task-history")
    assert (task["upid"], task["task_type"], task["vmid"], task["node"]["name"]) == (
        SLOW_TASK,
        "qmstart",
        100,
        "pve3",
    )
    assert task["virtual_machine"]["name"] == "web-01" and task["endpoint"]["id"] == ENDPOINT["pk"]
    assert my_vm_keys(netbox) == before
    # a node task (no VMID): no guest is read or written
    body = ok(backend, "task-history", upid=NODE_TASK)
    assert "virtual-machines" not in {s["stage"] for s in body["stages"]}
    [node_task] = mine(netbox, "plugins/hvsync/task-history", upid=NODE_TASK)
    assert (node_task["vmid"], node_task["virtual_machine"], node_task["node"]["name"]) == (
        None,
        None,
        "pve2",
    )
    assert len(mine(netbox, "plugins/hvsync/task-history")) == 2 and my_vm_keys(netbox) == before


def test_unknown_objects_answer_404_and_write_nothing(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    _, backend = demo
    before = changelog_count(netbox)
    cases = [
        ("node", {"node": "pve9"}, "pve9"),
        ("storage", {"storage": "no-such-store"}, "no-such-store"),
        ("snapshot", {"vmid": 100, "name": "never-taken"}, "never-taken"),
        (
            "backup",
            {"vmid": 105, "volid": "local:backup/vzdump-qemu-105-1999_01_01-00_00_00.vma.zst"},
            "1999",
        ),
        ("task-history", {"upid": "UPID:pve2:00000001:00000001:60000000:qmstart:100:root@pam:"}, "60000000"),
        ("vm", {"vmid": 4242}, "4242"),
        ("snapshot", {"vmid": 4242}, "4242"),
    ]
    for kind, params, named in cases:
        r = sync(backend, kind, **params)
        assert r.status_code == 404, (kind, r.text)
        assert r.json()["ok"] is False and named in r.json()["detail"], (kind, r.text)
        changes = netbox.all("core/object-changes", ordering="-id")[: changelog_count(netbox) - before]
        assert not changes, (
            kind,
            [(c["action"]["value"], c["changed_object_type"], c["object_repr"]) for c in changes],
        )


@pytest.mark.parametrize(
    ("kind", "params", "field"),
    [
        ("node", {}, "node"),
        ("storage", {}, "storage"),
        ("storage", {"storage": "bad name!"}, "storage"),
        ("snapshot", {"name": "x"}, "vmid"),
        ("backup", {"volid": BACKUP}, "vmid"),
        ("backup", {"vmid": 100, "volid": BACKUP}, "volid"),  # the volume belongs to 105
        ("backup", {"vmid": 105, "volid": "no-storage-prefix"}, "volid"),
        ("task-history", {}, "upid"),
        ("task-history", {"upid": "not-a-upid"}, "upid"),
        ("task-history", {"upid": SLOW_TASK, "vmid": 101}, "vmid"),
        ("vm", {"vmid": "abc"}, "vmid"),
        ("cluster", {"hv_endpoint_ids": "x"}, "hv_endpoint_ids"),
    ],
)
def test_bad_queries_answer_422_naming_the_field(
    demo: tuple[Any, Backend], kind: str, params: dict[str, Any], field: str
) -> None:
    _, backend = demo
    r = sync(backend, kind, **params)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", field]


def test_scope_parameters_pin_the_endpoint(demo: tuple[Any, Backend], netbox: NetBox) -> None:
    _, backend = demo
    with running_emulator(scenario="large", vms=2) as other:
        second = backend.add_hv(other, "individual other (inv:9901)", site_slug="other-site")
        vmid = sorted(other.state.guests)[0]
        guest = other.state.guests[vmid]
        # pinned to the first endpoint: the second's guest is not in scope
        r = sync(backend, "snapshot", vmid=vmid, hv_endpoint_ids=ENDPOINT["backend_id"])
        assert r.status_code == 404 and str(vmid) in r.json()["detail"]
        # pinned to the second endpoint: its guest and the node it lives on, under its own identity
        # (a snapshot sync: no IP addresses, which NetBox keeps globally unique, are left behind)
        r = sync(backend, "snapshot", vmid=vmid, hv_endpoint_ids=second["id"])
        assert r.status_code == 200, r.text
        assert {k for k in vm_keys(netbox) if k.startswith("inv9901|")} == {f"inv9901|vm|{vmid}"}
        other_devices = [
            d for d in netbox.all("dcim/devices", tag="hvsync") if d["site"]["slug"] == "other-site"
        ]
        assert [d["custom_fields"]["hvsync_key"] for d in other_devices] == [f"inv9901|node|{guest.node}"]
        # the first endpoint's objects were not touched by the pinned run
        assert not [k for k in my_vm_keys(netbox) if k.startswith(f"{ident()}|") and k.endswith(f"|{vmid}")]
        unknown = sync(backend, "node", node="pve1", hv_endpoint_ids=987654)
        assert unknown.status_code == 404 and "987654" in unknown.text
        # every request after this one pins the first endpoint (the second's emulator stops here)


def test_task_history_retention_removes_only_old_unlisted_managed_rows(
    demo: tuple[Any, Backend], netbox: NetBox
) -> None:
    emu, backend = demo
    route = "/plugins/hvsync/task-history/create/stream"
    scope = {"hv_endpoint_ids": str(ENDPOINT["backend_id"])}
    assert backend.complete(route, **scope)["ok"] is True
    listed = {t.upid for t in emu.state.tasks.values()}
    assert {t["upid"] for t in mine(netbox, "plugins/hvsync/task-history")} == listed  # demo tasks: Dec 2025
    recent = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    old = (datetime.now(UTC) - timedelta(days=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with netbox.client() as c:
        extra = [
            # hvsync wrote it, Proxmox forgot it two days ago: kept (inside the retention window)
            {
                "upid": "UPID:pve1:0000AAAA:0000AAAA:6A000000:qmstart:100:root@pam:",
                "tags": [{"slug": "hvsync"}],
                "starttime": recent,
            },
            # not written by hvsync (no managed tag), old: never touched
            {
                "upid": "UPID:pve1:0000BBBB:0000BBBB:5A000000:qmstart:100:root@pam:",
                "tags": [],
                "starttime": old,
            },
        ]
        for row in extra:
            r = c.post(
                "plugins/hvsync/task-history/",
                json={"endpoint": ENDPOINT["pk"], "task_type": "qmstart", "status": "OK", **row},
            )
            assert r.status_code == 201, r.text
    # Proxmox rotates two old tasks out of its log
    gone = sorted(emu.state.tasks)[:2]
    gone_upids = {emu.state.tasks[k].upid for k in gone}
    for k in gone:
        del emu.state.tasks[k]
    dry = backend.complete(route, dry_run="true", **scope)
    assert dry["summary"]["deleted"] == 2
    assert {p["key"].split("|task|")[1] for p in dry["plan"] if p["action"] == "delete"} == gone_upids
    assert len(mine(netbox, "plugins/hvsync/task-history")) == len(listed) + 2
    done = backend.complete(route, **scope)
    assert done["ok"] is True and done["summary"]["deleted"] == 2 and done["summary"]["created"] == 0
    left = {t["upid"] for t in mine(netbox, "plugins/hvsync/task-history")}
    assert left == (listed - gone_upids) | {extra[0]["upid"], extra[1]["upid"]}
    # a selected-object run never prunes
    before = changelog_count(netbox)
    ok(backend, "task-history", upid=SLOW_TASK)
    assert changelog_count(netbox) == before
    assert backend.complete(route, **scope)["requests"]["netbox_writes"] == 0
