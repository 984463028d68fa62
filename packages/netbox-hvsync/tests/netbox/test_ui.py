"""UI pages render through NetBox's real views, middleware and templates."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

ROUTES = {
    "backend-endpoints": "backendendpoint",
    "inventory-endpoints": "inventoryendpoint",
    "hv-endpoints": "hvendpoint",
    "clusters": "hvcluster",
    "nodes": "hvnode",
    "storage": "hvstorage",
    "backups": "hvbackup",
    "snapshots": "hvsnapshot",
    "task-history": "hvtaskhistory",
    "backup-routines": "backuproutine",
    "replications": "replication",
    "deletion-requests": "deletionrequest",
    "apply-jobs": "applyjob",
    "synced-virtual-machines": "syncedvirtualmachine",
    "synced-devices": "synceddevice",
    "synced-interfaces": "syncedinterface",
    "synced-virtual-disks": "syncedvirtualdisk",
    "synced-ip-addresses": "syncedipaddress",
    "synced-vlans": "syncedvlan",
    "synced-prefixes": "syncedprefix",
}
READ_ONLY = {"apply-jobs"} | {r for r in ROUTES if r.startswith("synced-")}


@pytest.fixture
def one_of_each(hv, netbox_objects, superuser):
    from ipam.models import VLAN, IPAddress, Prefix
    from netbox_hvsync import models
    from virtualization.models import VirtualDisk, VMInterface

    vm, endpoint = netbox_objects["vm1"], hv["endpoint"]
    backend = models.BackendEndpoint(name="backend", url="https://hvsync.example.net:8800", enabled=False)
    backend.token = "ui-planted-backend-key-1234567890abcdef"
    backend.save()
    objects = {
        "backend-endpoints": backend,
        "inventory-endpoints": models.InventoryEndpoint.objects.create(
            name="nb", domain="nb.example", token_key="k"
        ),
        "hv-endpoints": endpoint,
        "clusters": hv["hv_cluster"],
        "nodes": hv["node1"],
        "storage": hv["pbs"],
        "backups": models.HvBackup.objects.create(
            storage=hv["pbs"], volid="pbs:backup/vm/100/x", vmid=100, virtual_machine=vm
        ),
        "snapshots": models.HvSnapshot.objects.create(virtual_machine=vm, name="snap1"),
        "task-history": models.HvTaskHistory.objects.create(
            endpoint=endpoint, upid="UPID:pve1:1", task_type="qmstart", starttime="2026-11-20T01:00:00Z"
        ),
        "backup-routines": models.BackupRoutine.objects.create(
            endpoint=endpoint, job_id="job-ui", storage=hv["pbs"], raw_config={"id": "job-ui"}
        ),
        "replications": models.Replication.objects.create(
            endpoint=endpoint, replication_id="100-0", virtual_machine=vm, guest=100, target="pve2", jobnum=0
        ),
        "deletion-requests": deletion_request(vm, "web-1", superuser),
        "apply-jobs": models.ApplyJob.objects.create(endpoint=endpoint, plan={"steps": 1}),
        "synced-virtual-machines": models.SyncedVirtualMachine.objects.create(
            endpoint=endpoint, virtual_machine=vm, cluster=hv["hv_cluster"], node_name="pve1", vmid=100
        ),
        "synced-devices": models.SyncedDevice.objects.create(
            endpoint=endpoint, device=netbox_objects["device"], node=hv["node1"], node_name="pve1"
        ),
        "synced-interfaces": models.SyncedInterface.objects.create(
            endpoint=endpoint,
            vm_interface=VMInterface.objects.create(virtual_machine=vm, name="net0"),
            vmid=100,
            key="net0",
        ),
        "synced-virtual-disks": models.SyncedVirtualDisk.objects.create(
            endpoint=endpoint,
            virtual_disk=VirtualDisk.objects.create(virtual_machine=vm, name="scsi0", size=8),
            vmid=100,
            key="scsi0",
        ),
        "synced-ip-addresses": models.SyncedIPAddress.objects.create(
            endpoint=endpoint,
            ip_address=IPAddress.objects.create(address="192.0.2.5/24"),
            address="192.0.2.5/24",
        ),
        "synced-vlans": models.SyncedVLAN.objects.create(
            endpoint=endpoint, vlan=VLAN.objects.create(vid=5, name="v5"), vnet="v5"
        ),
        "synced-prefixes": models.SyncedPrefix.objects.create(
            endpoint=endpoint, prefix=Prefix.objects.create(prefix="203.0.113.0/24"), vnet="v5", subnet="s1"
        ),
    }
    return objects


def check_pages(ui, route: str, obj) -> list[str]:
    """Problems with one model's list, detail, add/edit and delete pages (empty when all is well)."""
    problems = []
    listing = ui.get(f"/plugins/hvsync/{route}/")
    if listing.status_code != 200 or f"/plugins/hvsync/{route}/{obj.pk}/" not in listing.content.decode():
        problems.append(f"list {listing.status_code} or row link missing")
    detail = ui.get(f"/plugins/hvsync/{route}/{obj.pk}/")
    if detail.status_code != 200 or str(obj) not in detail.content.decode():
        problems.append(f"detail {detail.status_code}")
    edit = ui.get(f"/plugins/hvsync/{route}/{obj.pk}/edit/").status_code
    add = ui.get(f"/plugins/hvsync/{route}/add/").status_code
    expected = 404 if route in READ_ONLY else 200
    if (edit, add) != (expected, expected):
        problems.append(f"edit/add {edit}/{add}, expected {expected}")
    if (status := ui.get(f"/plugins/hvsync/{route}/{obj.pk}/delete/").status_code) != 200:
        problems.append(f"delete {status}")
    if (status := ui.get(f"/plugins/hvsync/{route}/?q=zzz-no-match").status_code) != 200:
        problems.append(f"filtered list {status}")
    return problems


def test_list_detail_edit_pages_render(ui, one_of_each):
    """One fixture for all 20 models (building it per model would dominate the suite's run time)."""
    problems = {route: p for route in sorted(ROUTES) if (p := check_pages(ui, route, one_of_each[route]))}
    assert problems == {}


def test_secrets_never_rendered(ui, one_of_each):
    backend = one_of_each["backend-endpoints"]
    for url in (
        f"/plugins/hvsync/backend-endpoints/{backend.pk}/",
        f"/plugins/hvsync/backend-endpoints/{backend.pk}/edit/",
        "/plugins/hvsync/backend-endpoints/",
    ):
        page = ui.get(url).content.decode()
        assert "ui-planted-backend-key-1234567890abcdef" not in page and backend.token_ciphertext not in page


def test_edit_form_keeps_secret_when_blank_and_sets_new_one(ui, hv):
    endpoint = hv["endpoint"]
    form = {
        "name": "pve-a",
        "domain": "pve-a.example.net",
        "port": 8006,
        "username": "root@pam",
        "access_methods": ["token"],
        "token_name": "hvsync",
        "token_value": "",
        "verify_ssl": "on",
        "enabled": "on",
        "timeout": 15,
        "max_retries": 2,
        "retry_backoff": 0.5,
    }
    response = ui.post(f"/plugins/hvsync/hv-endpoints/{endpoint.pk}/edit/", form)
    assert response.status_code == 302, response.content.decode()[-3000:]
    endpoint.refresh_from_db()
    assert endpoint.token_value == "pve-a-token-secret-0001"
    response = ui.post(
        f"/plugins/hvsync/hv-endpoints/{endpoint.pk}/edit/", {**form, "token_value": "new-secret-42"}
    )
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.token_value == "new-secret-42"
    bad = ui.post(f"/plugins/hvsync/hv-endpoints/{endpoint.pk}/edit/", {**form, "token_name": ""})
    assert bad.status_code == 200 and "Token access needs the token name" in bad.content.decode()


def test_home_page_footer_links_sync_state(ui, one_of_each):
    home = ui.get("/plugins/hvsync/")
    assert home.status_code == 200
    body = home.content.decode()
    assert 'href="/plugins/hvsync/sync-state/"' in body and "/plugins/hvsync/backup-routines/" in body
    assert (
        ui.get("/plugins/hvsync/sync-state/").status_code == 200
    )  # the page itself: test_orchestration_repair


def test_menu_lists_plugin_pages_but_not_sync_state(ui, one_of_each):
    body = ui.get("/").content.decode()
    assert "/plugins/hvsync/hv-endpoints/" in body and "/plugins/hvsync/sync-state/" not in body


def test_netbox_pages_link_to_proxmox_records(ui, one_of_each, netbox_objects, hv):
    vm_page = ui.get(f"/virtualization/virtual-machines/{netbox_objects['vm1'].pk}/").content.decode()
    assert "Proxmox (hvsync)" in vm_page
    assert f"/plugins/hvsync/synced-virtual-machines/{one_of_each['synced-virtual-machines'].pk}/" in vm_page
    assert f"/plugins/hvsync/snapshots/{one_of_each['snapshots'].pk}/" in vm_page
    device_page = ui.get(f"/dcim/devices/{netbox_objects['device'].pk}/").content.decode()
    assert f"/plugins/hvsync/nodes/{hv['node1'].pk}/" in device_page
    cluster_page = ui.get(f"/virtualization/clusters/{netbox_objects['cluster'].pk}/").content.decode()
    assert f"/plugins/hvsync/clusters/{hv['hv_cluster'].pk}/" in cluster_page
    assert (
        "Proxmox (hvsync)"
        not in ui.get(f"/virtualization/virtual-machines/{netbox_objects['vm2'].pk}/").content.decode()
    )


def test_ui_needs_view_permission(hv):
    from django.test import Client
    from users.models import User

    client = Client()
    client.force_login(User.objects.create_user(username="ui-outsider"))
    assert client.get("/plugins/hvsync/hv-endpoints/").status_code == 403
    assert client.get(f"/plugins/hvsync/hv-endpoints/{hv['endpoint'].pk}/").status_code == 403


def test_filing_a_deletion_request_records_the_requester(ui, superuser, netbox_objects):
    from django.contrib.contenttypes.models import ContentType
    from netbox_hvsync.models import DeletionRequest

    vm = netbox_objects["vm2"]
    response = ui.post(
        "/plugins/hvsync/deletion-requests/add/",
        {
            "object_type": ContentType.objects.get_for_model(vm).pk,
            "object_id": vm.pk,
            "object_repr": "db-1",
            "reason": "retired",
        },
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    request = DeletionRequest.objects.get(object_repr="db-1")
    assert request.requested_by == superuser and request.status == "pending" and request.decided_by is None


def test_global_search_finds_plugin_records(ui, hv):
    from netbox.search.backends import search_backend
    from netbox_hvsync.models import BackupRoutine, HvEndpoint

    routine = BackupRoutine.objects.create(endpoint=hv["endpoint"], job_id="nightly-zz9", comment="offsite")
    endpoint = HvEndpoint.objects.create(
        name="pve-zz", domain="pve-zz.example.net", username="root@pam", access_methods=["password"]
    )
    for record in (routine, endpoint):  # NetBox defers indexing past the commit a test never makes
        search_backend.cache(record)
    page = ui.get("/search/", {"q": "nightly-zz9"}).content.decode()
    assert f"/plugins/hvsync/backup-routines/{routine.pk}/" in page
    page = ui.get("/search/", {"q": "pve-zz.example"}).content.decode()
    assert f"/plugins/hvsync/hv-endpoints/{endpoint.pk}/" in page


def deletion_request(vm, label: str, requester):
    """A pending deletion request for `vm`, filed by `requester`."""
    from django.contrib.contenttypes.models import ContentType
    from netbox_hvsync.models import DeletionRequest

    return DeletionRequest.objects.create(
        object_type=ContentType.objects.get_for_model(vm),
        object_id=vm.pk,
        object_repr=label,
        requested_by=requester,
    )


def test_a_decided_deletion_request_cannot_be_edited(ui, superuser, netbox_objects):
    """An approval is for the object it names: editing an approved request used to keep its status."""
    from django.contrib.contenttypes.models import ContentType

    vm, other = netbox_objects["vm2"], netbox_objects["vm1"]
    request = deletion_request(vm, "db-1", superuser)
    form = {"object_type": ContentType.objects.get_for_model(vm).pk, "object_repr": "db-1", "reason": "x"}
    edited = ui.post(f"/plugins/hvsync/deletion-requests/{request.pk}/edit/", {**form, "object_id": vm.pk})
    assert edited.status_code == 302, edited.content.decode()[-2000:]  # pending: may change
    from users.models import User

    request.refresh_from_db()
    request.status, request.decided_by = "approved", User.objects.create_user(username="reviewer")
    request.save()
    refused = ui.post(
        f"/plugins/hvsync/deletion-requests/{request.pk}/edit/", {**form, "object_id": other.pk}
    )
    assert refused.status_code == 200
    assert "already approved" in refused.content.decode() and "object_id" in refused.content.decode()
    request.refresh_from_db()
    assert (request.object_id, request.status, request.reason) == (vm.pk, "approved", "x")
