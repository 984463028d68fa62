"""The rows route (`/api/plugins/hvsync/rows/<path>/`) in real NetBox: every value it gives is the value
NetBox's REST list gives, for the same filters, permissions and pages, at a cost that does not grow with
the rows' related objects (docs/apply-path.md, "Flat reads")."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from support import guest_records, token_client

ROWS = "/api/plugins/hvsync/rows/"
DISCOVERY = "/api/plugins/hvsync/change-sets/"


@pytest.fixture
def inventory(db, hv):
    """What a sync leaves in NetBox for two guests: VMs with every relation the backend compares, their
    interfaces (MAC, VLANs), disks and addresses, a node interface, a prefix, tags, the key custom field
    and the plugin's sidecars."""
    from dcim.models import DeviceRole, Interface, MACAddress, Platform
    from django.contrib.contenttypes.models import ContentType
    from extras.models import CustomField, Tag
    from ipam.models import VLAN, IPAddress, Prefix, VLANGroup
    from netbox_hvsync import models
    from virtualization.models import VirtualDisk, VirtualMachine, VMInterface

    managed = Tag.objects.create(name="hvsync", slug="hvsync", color="2196f3")
    extra = Tag.objects.create(name="prod", slug="prod")
    key = CustomField.objects.create(
        name="hvsync_key", type="text", filter_logic="exact"
    )  # as the backend makes it
    key.object_types.set(
        ContentType.objects.get_for_model(m)
        for m in (VirtualMachine, VMInterface, VirtualDisk, IPAddress, Interface, Prefix, VLAN)
    )
    site, cluster, device = hv["site"], hv["cluster"], hv["device"]
    role = DeviceRole.objects.create(name="Virtual Machine", slug="pve-qemu")
    platform = Platform.objects.create(name="Proxmox l26", slug="pve-l26")
    group = VLANGroup.objects.create(name="pve-a vlans", slug="pve-a-vlans")
    vlans = [VLAN.objects.create(vid=vid, name=f"VLAN {vid}", group=group) for vid in (10, 20, 30)]
    prefix = Prefix.objects.create(prefix="10.0.0.0/24", vlan=vlans[0], custom_field_data={"hvsync_key": "p"})
    prefix.tags.add(managed)
    node_iface = Interface.objects.create(device=device, name="vmbr0", type="bridge", mtu=1500)
    node_iface.tags.add(managed)
    for n in range(2):
        vm = VirtualMachine.objects.create(
            name=f"guest-{n}",
            cluster=cluster,
            site=site,
            device=device,
            role=role,
            platform=platform,
            vcpus=2,
            memory=2048,
            status="active",
            custom_field_data={"hvsync_key": f"pve-a|vm|{100 + n}"},
        )
        vm.tags.add(managed, extra)
        iface = VMInterface.objects.create(
            virtual_machine=vm,
            name="net0",
            mtu=9000,
            mode="tagged",
            untagged_vlan=vlans[0],
            description="bridge vmbr0",
            custom_field_data={"hvsync_key": f"pve-a|vm|{100 + n}|nic|net0"},
        )
        iface.tagged_vlans.set(vlans[1:])
        iface.tags.add(managed)
        mac = MACAddress.objects.create(mac_address=f"bc:24:11:00:00:0{n}", assigned_object=iface)
        iface.primary_mac_address = mac
        iface.save()
        disk = VirtualDisk.objects.create(
            virtual_machine=vm,
            name="scsi0",
            size=32768,
            custom_field_data={"hvsync_key": f"pve-a|vm|{100 + n}|disk|scsi0"},
        )
        disk.tags.add(managed)
        ip = IPAddress.objects.create(
            address=f"10.0.0.{10 + n}/24",
            assigned_object=iface,
            custom_field_data={"hvsync_key": f"pve-a|ip|10.0.0.{10 + n}"},
        )
        ip.tags.add(managed)
        vm.primary_ip4 = ip
        vm.save()
        endpoint = hv["endpoint"]
        models.SyncedVirtualMachine.objects.create(
            endpoint=endpoint, virtual_machine=vm, vmid=100 + n, node_name="pve1", cluster=hv["hv_cluster"]
        )
        models.SyncedInterface.objects.create(endpoint=endpoint, vm_interface=iface, vmid=100 + n, key="net0")
        models.SyncedVirtualDisk.objects.create(
            endpoint=endpoint, virtual_disk=disk, vmid=100 + n, key="scsi0"
        )
        models.SyncedIPAddress.objects.create(
            endpoint=endpoint, ip_address=ip, vmid=100 + n, interface_key="net0", address=str(ip.address)
        )
    endpoint, guest = hv["endpoint"], VirtualMachine.objects.get(name="guest-0")
    models.SyncedInterface.objects.create(
        endpoint=endpoint, interface=node_iface, node_name="pve1", key="vmbr0"
    )
    models.SyncedDevice.objects.create(endpoint=endpoint, device=device, node=hv["node1"], node_name="pve1")
    models.SyncedVLAN.objects.create(endpoint=endpoint, vlan=vlans[0], zone="z1", vnet="v10")
    models.SyncedPrefix.objects.create(endpoint=endpoint, prefix=prefix, vnet="v10", subnet="z1-10.0.0.0-24")
    guest_records(hv, guest)
    return {"vlans": vlans}


def within(flat: Any, rest: Any, where: str) -> None:
    """Every value in `flat` is the value REST gives at the same place (related objects: a subset)."""
    if isinstance(flat, dict):
        assert isinstance(rest, dict), where
        for name, value in flat.items():
            assert name in rest, f"{where}.{name} is not in the REST answer"
            within(value, rest[name], f"{where}.{name}")
    elif isinstance(flat, list):
        assert isinstance(rest, list) and len(flat) == len(rest), where
        for i, (a, b) in enumerate(zip(flat, rest, strict=True)):
            within(a, b, f"{where}[{i}]")
    else:
        assert flat == rest, f"{where}: rows {flat!r} != REST {rest!r}"


def by_id(answer: Any) -> dict[int, dict[str, Any]]:
    assert answer.status_code == 200, answer.content
    return {row["id"]: row for row in answer.json()["results"]}


def test_discovery_names_the_paths_served_as_rows(api):
    offer = api.get(DISCOVERY).json()
    assert "virtualization/virtual-machines" in offer["read_paths"]
    assert offer["read_paths"] == offer["paths"]


def test_every_value_of_every_served_path_is_the_rest_value(api, inventory):
    from netbox_hvsync.wire.change_sets import WRITABLE_PATHS

    compared = 0
    for path in sorted(WRITABLE_PATHS):
        flat = by_id(api.get(f"{ROWS}{path}/"))
        assert flat, f"the fixture holds no {path}: nothing would be compared"
        fields = sorted(next(iter(flat.values())))
        rest = by_id(api.get(f"/api/{path}/", {"fields": ",".join(fields), "limit": 1000}))
        assert sorted(flat) == sorted(rest), path
        for pk, row in flat.items():
            assert sorted(row) == sorted(rest[pk]), f"{path} {pk}: fields differ"
            within(row, rest[pk], f"{path}[{pk}]")
            compared += 1
    assert compared >= 50


def test_related_objects_are_flat_with_their_plain_fields(api, inventory):
    fields = "id,name,primary_mac_address,tagged_vlans,virtual_machine,tags,custom_fields"
    answer = api.get(
        f"{ROWS}virtualization/interfaces/", {"fields": fields, "cf_hvsync_key__isw": "pve-a|vm|100|"}
    )
    [row] = answer.json()["results"]
    mac = row["primary_mac_address"]
    assert mac == {"id": mac["id"], "mac_address": "BC:24:11:00:00:00", "description": ""}
    assert [v["vid"] for v in row["tagged_vlans"]] == [20, 30]
    assert all(set(v) == {"id", "vid", "name", "description"} for v in row["tagged_vlans"])
    assert set(row["virtual_machine"]) == {"id", "name", "description"}
    assert [t["slug"] for t in row["tags"]] == ["hvsync"]
    assert "url" not in row["tags"][0]


def test_filters_are_the_rest_routes_own(api, inventory):
    for path, params in [
        ("virtualization/virtual-machines", {"tag": "prod"}),
        ("virtualization/interfaces", {"cf_hvsync_key__isw": ["pve-a|vm|101|", "nothing|"]}),
        ("virtualization/virtual-disks", {"tag": "hvsync", "virtual_machine": "guest-0"}),
        ("plugins/hvsync/synced-interfaces", {"vmid": 100}),
    ]:
        flat = by_id(api.get(f"{ROWS}{path}/", {**params, "fields": "id"}))
        rest = by_id(api.get(f"/api/{path}/", {**params, "fields": "id"}))
        assert flat and sorted(flat) == sorted(rest), (path, params)
        assert len(flat) < len(by_id(api.get(f"{ROWS}{path}/", {"fields": "id"}))), (path, "filtered nothing")


@pytest.mark.parametrize(
    "params",
    [
        {"tag": "hvsync", "name__ic": "GUEST-1", "status": "active"},
        {"cf_hvsync_key__isw": ["pve-a|vm|100"], "vcpus__gte": 2, "memory": 2048},
        {"tag": "hvsync", "no_such_filter": "x"},  # not a filter: ignored, as REST ignores it
    ],
)
def test_filters_it_is_not_asked_for_change_nothing(api, inventory, params):
    """Only the filters a query names are built (docs/apply-path.md): combinations, lookups and unknown
    names select what REST selects."""
    path = "virtualization/virtual-machines"
    flat = by_id(api.get(f"{ROWS}{path}/", {**params, "fields": "id"}))
    rest = by_id(api.get(f"/api/{path}/", {**params, "fields": "id"}))
    assert flat and sorted(flat) == sorted(rest), params


def test_a_filter_read_from_several_parameters_is_kept(inventory):
    """A filter whose form field spans several parameters (`made_after`, `made_before`) is named by none
    of them exactly: it is kept all the same, so its parameters still filter."""
    import django_filters
    from django.http import QueryDict
    from netbox_hvsync.api.rows import _narrowed
    from virtualization.filtersets import VirtualMachineFilterSet
    from virtualization.models import VirtualMachine

    class Dated(VirtualMachineFilterSet):
        made = django_filters.DateFromToRangeFilter(field_name="created")

        class Meta(VirtualMachineFilterSet.Meta):
            pass

    params = QueryDict("made_after=2999-01-01&tag=hvsync")
    narrowed = _narrowed(Dated, params)
    assert {"made", "tag"} <= set(narrowed.get_filters()) and len(narrowed.get_filters()) < 10
    everything = VirtualMachine.objects.all()
    assert Dated(QueryDict("tag=hvsync"), queryset=everything).qs.count() == 2
    assert (
        narrowed(params, queryset=everything).qs.count() == 0 == Dated(params, queryset=everything).qs.count()
    )


def test_a_saved_filter_applies_as_over_rest(api, inventory):
    """A saved filter's stored parameters may name any filter: the whole filterset serves that query."""
    from django.contrib.contenttypes.models import ContentType
    from extras.models import SavedFilter
    from virtualization.models import VirtualMachine

    saved = SavedFilter.objects.create(
        name="only guest 1", slug="only-guest-1", shared=True, enabled=True, parameters={"name": ["guest-1"]}
    )
    saved.object_types.set([ContentType.objects.get_for_model(VirtualMachine)])
    path = "virtualization/virtual-machines"
    flat = by_id(api.get(f"{ROWS}{path}/", {"filter": "only-guest-1", "fields": "id,name"}))
    rest = by_id(api.get(f"/api/{path}/", {"filter": "only-guest-1", "fields": "id,name"}))
    assert [r["name"] for r in flat.values()] == ["guest-1"]
    assert sorted(flat) == sorted(rest)


def test_pages_follow_limit_and_offset_in_id_order(api, inventory):
    from virtualization.models import VMInterface

    ids = sorted(VMInterface.objects.values_list("pk", flat=True))
    answer = api.get(f"{ROWS}virtualization/interfaces/", {"fields": "id", "limit": 1, "offset": 1}).json()
    assert answer["count"] == len(ids) == 2
    assert [r["id"] for r in answer["results"]] == ids[1:2]


def test_queries_do_not_grow_with_rows(api, inventory, hv):
    from virtualization.models import VirtualMachine

    fields = "id,name,status,cluster,device,site,vcpus,memory,role,platform,tags,custom_fields,primary_ip4"
    path = f"{ROWS}virtualization/virtual-machines/"
    api.get(path, {"fields": fields})  # warm NetBox's caches (custom fields, content types)
    with CaptureQueriesContext(connection) as few:
        before = api.get(path, {"fields": fields}).json()["count"]
    for n in range(8):
        vm = VirtualMachine.objects.create(name=f"more-{n}", cluster=hv["cluster"], site=hv["site"])
        vm.tags.add(*VirtualMachine.objects.get(name="guest-0").tags.all())
    with CaptureQueriesContext(connection) as many:
        assert api.get(path, {"fields": fields}).json()["count"] == before + 8
    assert len(many.captured_queries) == len(few.captured_queries)


def test_object_permissions_decide_what_is_listed(db, inventory):
    from django.contrib.contenttypes.models import ContentType
    from users.models import ObjectPermission, User
    from virtualization.models import VirtualMachine

    user = User.objects.create_user(username="rows-limited")
    permission = ObjectPermission.objects.create(
        name="rows-vms", actions=["view"], constraints={"name": "guest-1"}
    )
    permission.object_types.set([ContentType.objects.get_for_model(VirtualMachine)])
    permission.users.add(user)
    client = token_client(user, write_enabled=False)
    rows = client.get(f"{ROWS}virtualization/virtual-machines/", {"fields": "id,name"}).json()["results"]
    assert [r["name"] for r in rows] == ["guest-1"]
    refused = client.get(f"{ROWS}virtualization/interfaces/", {"fields": "id"})
    assert refused.status_code == 403
    assert refused.json()["field"] == "path"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "many"}, "limit"),
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"offset": -1}, "offset"),
        ({"offset": 10**40}, "offset"),
        ({"limit": "\u0661\u0660"}, "limit"),  # Arabic-Indic digits, which int() would take
        ({"fields": "id,no_such_field"}, "fields"),
        ({"fields": "id,add_tags"}, "fields"),  # write-only: never shown, as over REST
        ({"fields": "id,display"}, "fields"),  # computed: needs REST's own queryset
        ({"id": "not-a-number"}, "id"),
    ],
)
def test_bad_input_is_refused_naming_the_field(api, inventory, query, field):
    answer = api.get(f"{ROWS}virtualization/virtual-machines/", query)
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field


def test_paths_it_does_not_serve_and_turned_off(api, inventory, settings):
    missing = api.get(f"{ROWS}users/users/")
    assert missing.status_code == 404
    assert missing.json()["field"] == "path"
    settings.PLUGINS_CONFIG = {**settings.PLUGINS_CONFIG, "netbox_hvsync": {"change_sets": False}}
    assert api.get(DISCOVERY).json()["read_paths"] == []
    assert api.get(f"{ROWS}virtualization/virtual-machines/").status_code == 404


def test_reads_need_a_token_or_login(inventory):
    from rest_framework.test import APIClient

    assert APIClient().get(f"{ROWS}virtualization/virtual-machines/").status_code in (401, 403)


def test_no_credential_is_served(api, inventory):
    from netbox_hvsync.wire.change_sets import WRITABLE_PATHS

    assert api.get(f"{ROWS}plugins/hvsync/hv-endpoints/").status_code == 404
    for path in sorted(WRITABLE_PATHS):
        answer = api.get(f"{ROWS}{path}/")
        assert answer.status_code == 200
        assert b"pve-a-token-secret-0001" not in answer.content, path  # planted by the hv fixture
