"""Deletion requests in a real NetBox (issue 40): raised once per object, four eyes over REST and the UI,
applying deletes the VM the NetBox way (disks, interfaces, IPs, sidecars, changelog rows) after Proxmox is
read again; rejected, withdrawn, expired; the superuser rule.

The backend is faked at the plugin's transport seam (`resolve_backend()`), as the sync tests do: it answers
`GET /hv/guests/{vmid}` from `FakeGuests.present`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from backend_fakes import FakeResponse
from support import API, token_client

BACKEND_ID = 7
VMID = 101


@dataclass
class FakeGuests:
    """The backend's guest read: `present` holds the VMIDs Proxmox has, with their config keys."""

    present: dict[int, list[str]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def request(self, method: str, url: str, **_: Any) -> FakeResponse:
        parts = urlsplit(url)
        self.calls.append(f"{method} {parts.path}?{parts.query}")
        vmid = int(parts.path.rsplit("/", 1)[-1])
        keys = self.present.get(vmid)
        data = {"vmid": vmid, "exists": keys is not None, "config_keys": keys or []}
        entry = {"endpoint_id": BACKEND_ID, "endpoint_name": "pve-a", "ok": True, "data": data, "error": None}
        return FakeResponse(200, {"endpoints": [entry]})


@pytest.fixture
def guests(monkeypatch) -> FakeGuests:
    from netbox_hvsync.backend import resolution
    from netbox_hvsync.backend.resolution import ResolvedBackend
    from netbox_hvsync.rules.transport import BackendContext

    fake = FakeGuests()
    resolved = ResolvedBackend(None, BackendContext("http://backend.invalid", "k" * 40, 1), fake)  # type: ignore[arg-type]
    monkeypatch.setattr(resolution, "resolve_backend", lambda selected=None: resolved)
    return fake


@pytest.fixture
def gone_vm(hv) -> dict[str, Any]:
    """VM web-1 as a sync leaves it: its sidecar (VMID 101), two NICs with an IP each, a disk, a primary IP."""
    from ipam.models import IPAddress
    from netbox_hvsync import models
    from virtualization.models import VirtualDisk, VMInterface

    endpoint, vm = hv["endpoint"], hv["vm1"]
    models.HvEndpoint.objects.filter(pk=endpoint.pk).update(backend_id=BACKEND_ID)
    endpoint.refresh_from_db()
    models.SyncedVirtualMachine.objects.create(
        endpoint=endpoint, virtual_machine=vm, vmid=VMID, node_name="pve1"
    )
    nics, ips = [], []
    for n in range(2):
        nic = VMInterface.objects.create(virtual_machine=vm, name=f"net{n}")
        models.SyncedInterface.objects.create(endpoint=endpoint, vm_interface=nic, vmid=VMID, key=f"net{n}")
        ip = IPAddress.objects.create(address=f"10.40.0.{n + 1}/24", assigned_object=nic)
        models.SyncedIPAddress.objects.create(
            endpoint=endpoint, ip_address=ip, vmid=VMID, interface_key=f"net{n}", address=str(ip.address)
        )
        nics.append(nic)
        ips.append(ip)
    disk = VirtualDisk.objects.create(virtual_machine=vm, name="scsi0", size=8)
    models.SyncedVirtualDisk.objects.create(endpoint=endpoint, virtual_disk=disk, vmid=VMID, key="scsi0")
    vm.primary_ip4 = ips[0]
    vm.save()
    return {"vm": vm, "endpoint": endpoint, "nics": nics, "ips": ips, "disk": disk}


def _user(name: str, *actions: str, superuser: bool = False):
    """A user holding `actions` on deletion requests, and view on the VMs and devices they name."""
    from django.contrib.contenttypes.models import ContentType
    from users.models import ObjectPermission, User

    user = User.objects.create_user(username=name, password=f"pw-{name}", is_superuser=superuser)
    if actions:
        permission = ObjectPermission.objects.create(name=f"dr-{name}", actions=list(actions))
        permission.object_types.set(
            [ContentType.objects.get(app_label="netbox_hvsync", model="deletionrequest")]
        )
        permission.users.add(user)
        sees = ObjectPermission.objects.create(name=f"view-{name}", actions=["view"])
        sees.object_types.set(
            [
                ContentType.objects.get(app_label="virtualization", model="virtualmachine"),
                ContentType.objects.get(app_label="dcim", model="device"),
            ]
        )
        sees.users.add(user)
    return user


@pytest.fixture
def people(db) -> dict[str, Any]:
    return {
        "requester": _user("sync-runner", "view", "approve"),
        "approver": _user("second-eyes", "view", "approve"),
        "viewer": _user("only-looks", "view"),
    }


def _raise(gone_vm, requester, reason: str = "gone from Proxmox since the last full sync"):
    from netbox_hvsync import deletions

    return deletions.raise_request(
        gone_vm["vm"],
        sidecar=deletions.sidecar_of(gone_vm["vm"]),
        endpoint=gone_vm["endpoint"],
        reason=reason,
        requested_by=requester,
        run_id="run-40",
    )


def test_raising_is_idempotent_and_one_open_request_per_object_is_a_db_rule(gone_vm, people):
    from django.db import IntegrityError, transaction
    from extras.models import JournalEntry
    from netbox_hvsync.models import DeletionRequest

    first = _raise(gone_vm, people["requester"])
    again = _raise(gone_vm, people["requester"], reason="another run")
    assert again.pk == first.pk and DeletionRequest.objects.count() == 1
    assert first.status == "pending" and first.run_id == "run-40" and first.object_repr == "web-1"
    assert first.identity == f"syncedvirtualmachine:{gone_vm['endpoint'].pk}:qemu/{VMID}"
    [entry] = JournalEntry.objects.filter(assigned_object_id=gone_vm["vm"].pk)
    assert entry.kind == "warning" and f"deletion request {first.pk}" in entry.comments

    duplicate = DeletionRequest(
        object_type=first.object_type, object_id=first.object_id, object_repr="web-1", status="approved"
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()


def test_requester_and_users_without_the_permission_get_403_over_rest(gone_vm, people):
    row = _raise(gone_vm, people["requester"])
    own = token_client(people["requester"]).post(
        f"{API}deletion-requests/{row.pk}/approve/", {}, format="json"
    )
    assert own.status_code == 403 and "four eyes" in own.json()["detail"]
    for action in ("approve", "reject"):
        answer = token_client(people["viewer"]).post(
            f"{API}deletion-requests/{row.pk}/{action}/", {"comment": "x"}, format="json"
        )
        assert answer.status_code == 403 and "approve_deletionrequest" in answer.json()["detail"]
    read_only = token_client(people["approver"], write_enabled=False)
    assert read_only.post(f"{API}deletion-requests/{row.pk}/approve/", {}, format="json").status_code == 403
    bad = token_client(people["approver"]).post(
        f"{API}deletion-requests/{row.pk}/approve/", {"comment": ["x"]}, format="json"
    )
    assert bad.status_code == 400 and "comment" in bad.json()
    for odd in ("null,null", "99999999999999999999", str(row.pk + 1000)):  # found by the REST fuzz run
        missing = token_client(people["approver"]).post(
            f"{API}deletion-requests/{odd}/approve/", {}, format="json"
        )
        assert missing.status_code == 404, odd
    row.refresh_from_db()
    assert row.status == "pending" and row.decided_by is None
    assert gone_vm["vm"].__class__.objects.filter(pk=gone_vm["vm"].pk).exists()


def test_a_second_person_approves_and_the_vm_goes_with_everything_that_belongs_to_it(gone_vm, people, guests):
    from core.models import ObjectChange
    from django.contrib.contenttypes.models import ContentType
    from ipam.models import IPAddress
    from netbox_hvsync import models
    from virtualization.models import VirtualDisk, VirtualMachine, VMInterface

    row = _raise(gone_vm, people["requester"])
    vm = gone_vm["vm"]
    answer = token_client(people["approver"]).post(
        f"{API}deletion-requests/{row.pk}/approve/", {"comment": "confirmed with the owner"}, format="json"
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["status"]["value"] == "applied" and body["decided_by"]["username"] == "second-eyes"
    assert body["comment"] == "confirmed with the owner" and body["applied_at"] and body["error"] == ""
    assert guests.calls == [f"GET /hv/guests/{VMID}?hv_endpoint_ids={BACKEND_ID}"]

    assert not VirtualMachine.objects.filter(pk=vm.pk).exists()
    assert not VMInterface.objects.filter(pk__in=[n.pk for n in gone_vm["nics"]]).exists()
    assert not IPAddress.objects.filter(pk__in=[i.pk for i in gone_vm["ips"]]).exists()
    assert not VirtualDisk.objects.filter(pk=gone_vm["disk"].pk).exists()
    assert not models.SyncedVirtualMachine.objects.filter(vmid=VMID).exists()
    assert not models.SyncedInterface.objects.filter(vmid=VMID).exists()
    assert not models.SyncedIPAddress.objects.filter(vmid=VMID).exists()

    deleted = body["deleted_data"]
    assert deleted["object"]["type"] == "virtualization.virtualmachine" and deleted["object"]["id"] == vm.pk
    assert deleted["object"]["data"]["name"] == "web-1"
    cascaded = deleted["cascaded"]
    assert sorted(i["display"] for i in cascaded["virtualization.vminterface"]) == ["net0", "net1"]
    assert [i["display"] for i in cascaded["virtualization.virtualdisk"]] == ["scsi0"]
    assert sorted(i["display"] for i in cascaded["ipam.ipaddress"]) == ["10.40.0.1/24", "10.40.0.2/24"]
    assert len(cascaded["netbox_hvsync.syncedvirtualmachine"]) == 1
    assert len(cascaded["netbox_hvsync.syncedinterface"]) == 2

    def deletions_of(model, pks):
        ct = ContentType.objects.get_for_model(model)
        return set(
            ObjectChange.objects.filter(
                changed_object_type=ct, changed_object_id__in=pks, action="delete"
            ).values_list("changed_object_id", flat=True)
        )

    assert deletions_of(VirtualMachine, [vm.pk]) == {vm.pk}
    assert deletions_of(VMInterface, [n.pk for n in gone_vm["nics"]]) == {n.pk for n in gone_vm["nics"]}
    assert deletions_of(IPAddress, [i.pk for i in gone_vm["ips"]]) == {i.pk for i in gone_vm["ips"]}
    assert deletions_of(VirtualDisk, [gone_vm["disk"].pk]) == {gone_vm["disk"].pk}
    sidecar_ids = [i["id"] for i in cascaded["netbox_hvsync.syncedvirtualmachine"]]
    assert deletions_of(models.SyncedVirtualMachine, sidecar_ids) == set(sidecar_ids)
    [vm_delete] = ObjectChange.objects.filter(changed_object_id=vm.pk, action="delete").filter(
        changed_object_type=ContentType.objects.get_for_model(VirtualMachine)
    )
    assert vm_delete.user == people["approver"] and vm_delete.prechange_data["name"] == "web-1"
    request_changes = ObjectChange.objects.filter(
        changed_object_type=ContentType.objects.get_for_model(models.DeletionRequest),
        changed_object_id=row.pk,
    ).order_by("pk")
    assert [c.postchange_data["status"] for c in request_changes] == ["approved", "applied"]
    # the decision was journalled on the VM (the entry went with the VM; its changelog row stays)
    journal = ObjectChange.objects.filter(changed_object_type__model="journalentry", action="create")
    assert any("approved by second-eyes" in (c.postchange_data or {}).get("comments", "") for c in journal)

    again = token_client(people["approver"]).post(
        f"{API}deletion-requests/{row.pk}/approve/", {}, format="json"
    )
    assert again.status_code == 409 and "already applied" in again.json()["detail"]


def test_reject_keeps_the_object_and_a_decided_request_is_409(gone_vm, people):
    from extras.models import JournalEntry

    row = _raise(gone_vm, people["requester"])
    client = token_client(people["approver"])
    answer = client.post(
        f"{API}deletion-requests/{row.pk}/reject/", {"comment": "still needed"}, format="json"
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"]["value"] == "rejected" and body["decided_by"]["username"] == "second-eyes"
    assert body["comment"] == "still needed" and body["deleted_data"] == {}
    assert gone_vm["vm"].__class__.objects.filter(pk=gone_vm["vm"].pk).exists()
    kinds = list(
        JournalEntry.objects.filter(assigned_object_id=gone_vm["vm"].pk).values_list("kind", "comments")
    )
    assert any(kind == "info" and "rejected by second-eyes" in text for kind, text in kinds)
    for action in ("approve", "reject"):
        conflict = client.post(f"{API}deletion-requests/{row.pk}/{action}/", {}, format="json")
        assert conflict.status_code == 409 and "already rejected" in conflict.json()["detail"]
    # the requester may reject their own request (keeping needs no second pair of eyes)
    mine = _raise(gone_vm, people["requester"])
    own = token_client(people["requester"]).post(
        f"{API}deletion-requests/{mine.pk}/reject/", {}, format="json"
    )
    assert own.status_code == 200 and own.json()["status"]["value"] == "rejected"


def test_the_guest_back_in_proxmox_withdraws_the_request_at_apply_time(gone_vm, people, guests):
    row = _raise(gone_vm, people["requester"])
    guests.present[VMID] = ["net0", "net1", "scsi0"]
    answer = token_client(people["approver"]).post(
        f"{API}deletion-requests/{row.pk}/approve/", {}, format="json"
    )
    assert answer.status_code == 200
    assert answer.json()["status"]["value"] == "withdrawn" and "back in Proxmox" in answer.json()["comment"]
    assert gone_vm["vm"].__class__.objects.filter(pk=gone_vm["vm"].pk).exists()


def test_another_identity_fails_the_request_and_deletes_nothing(gone_vm, people, guests):
    from netbox_hvsync import models

    row = _raise(gone_vm, people["requester"])
    models.SyncedVirtualMachine.objects.filter(virtual_machine=gone_vm["vm"]).update(vmid=202)
    body = (
        token_client(people["approver"])
        .post(f"{API}deletion-requests/{row.pk}/approve/", {}, format="json")
        .json()
    )
    assert body["status"]["value"] == "failed" and "not the same object" in body["error"]
    assert guests.calls == []  # nothing is read for another object
    assert gone_vm["vm"].__class__.objects.filter(pk=gone_vm["vm"].pk).exists()


def test_withdraw_for_an_object_that_came_back(gone_vm, people):
    from netbox_hvsync import deletions

    row = _raise(gone_vm, people["requester"])
    assert deletions.withdraw_for(gone_vm["vm"]) == 1
    row.refresh_from_db()
    assert row.status == "withdrawn" and deletions.withdraw_for(gone_vm["vm"]) == 0
    fresh = _raise(gone_vm, people["requester"])  # a closed request does not block a new one
    assert fresh.pk != row.pk and fresh.status == "pending"


def test_a_pending_request_expires_when_listed(gone_vm, people, settings):
    from datetime import timedelta

    from django.utils import timezone
    from netbox_hvsync.models import DeletionRequest

    settings.PLUGINS_CONFIG = {
        **settings.PLUGINS_CONFIG,
        "netbox_hvsync": {**settings.PLUGINS_CONFIG["netbox_hvsync"], "deletion_request_max_age_days": 7},
    }
    row = _raise(gone_vm, people["requester"])
    DeletionRequest.objects.filter(pk=row.pk).update(created=timezone.now() - timedelta(days=8))
    rows = token_client(people["viewer"]).get(f"{API}deletion-requests/?status=expired").json()["results"]
    assert [r["id"] for r in rows] == [row.pk] and "more than 7 days" in rows[0]["comment"]
    late = token_client(people["approver"]).post(
        f"{API}deletion-requests/{row.pk}/approve/", {}, format="json"
    )
    assert late.status_code == 409 and "already expired" in late.json()["detail"]


def test_a_superuser_is_no_exception_unless_the_setting_says_so(gone_vm, guests, settings):
    root = _user("root-requester", superuser=True)
    row = _raise(gone_vm, root)
    client = token_client(root)
    refused = client.post(f"{API}deletion-requests/{row.pk}/approve/", {}, format="json")
    assert refused.status_code == 403 and "allow_self_approval" in refused.json()["detail"]
    settings.PLUGINS_CONFIG = {
        **settings.PLUGINS_CONFIG,
        "netbox_hvsync": {**settings.PLUGINS_CONFIG["netbox_hvsync"], "allow_self_approval": True},
    }
    allowed = client.post(f"{API}deletion-requests/{row.pk}/approve/", {}, format="json")
    assert allowed.status_code == 200 and allowed.json()["status"]["value"] == "applied"


def test_ui_four_eyes_buttons_bulk_decisions_menu_badge_and_the_object_link(gone_vm, people, guests, hv):
    from django.test import Client
    from netbox_hvsync import deletions
    from netbox_hvsync.models import DeletionRequest

    row = _raise(gone_vm, people["requester"])
    requester, approver = Client(), Client()
    requester.force_login(people["requester"])
    approver.force_login(people["approver"])

    vm_page = approver.get(gone_vm["vm"].get_absolute_url()).content.decode()
    assert 'id="hvsync-open-deletion-request"' in vm_page and row.get_absolute_url() in vm_page
    listing = approver.get("/plugins/hvsync/deletion-requests/").content.decode()
    assert 'id="hvsync-pending-deletions"' in listing
    assert 'id="hvsync-bulk_approve"' in listing and 'id="hvsync-bulk_reject"' in listing

    own_page = requester.get(row.get_absolute_url()).content.decode()
    assert 'id="deletion-approve"' not in own_page and 'id="deletion-reject"' in own_page
    refused = requester.post(f"/plugins/hvsync/deletion-requests/{row.pk}/approve/", {"comment": "mine"})
    assert refused.status_code == 403
    viewer = Client()
    viewer.force_login(people["viewer"])
    assert viewer.post(f"/plugins/hvsync/deletion-requests/{row.pk}/reject/").status_code == 403
    row.refresh_from_db()
    assert row.status == "pending"

    page = approver.get(row.get_absolute_url()).content.decode()
    assert 'id="deletion-approve"' in page and 'id="deletion-comment"' in page
    done = approver.post(
        f"/plugins/hvsync/deletion-requests/{row.pk}/approve/", {"comment": "ok"}, follow=True
    )
    row.refresh_from_db()
    assert row.status == "applied" and row.comment == "ok" and "applied" in done.content.decode()

    # bulk: a confirmation page (NetBox's bulk style), then each request decided on its own
    keep = [
        deletions.raise_request(
            vm, sidecar=None, endpoint=hv["endpoint"], reason="x", requested_by=people["requester"], run_id=""
        )
        for vm in (hv["vm2"],)
    ]
    own = deletions.raise_request(
        hv["device"],
        sidecar=None,
        endpoint=hv["endpoint"],
        reason="x",
        requested_by=people["approver"],
        run_id="",
    )
    pks = [r.pk for r in keep] + [own.pk]
    confirm = approver.post("/plugins/hvsync/deletion-requests/reject/", {"pk": pks})
    assert confirm.status_code == 200 and 'id="hvsync-bulk-confirm"' in confirm.content.decode()
    assert DeletionRequest.objects.filter(pk__in=pks, status="pending").count() == 2
    approver.post(
        "/plugins/hvsync/deletion-requests/reject/", {"pk": pks, "_confirm": "1", "comment": "keep"}
    )
    assert set(DeletionRequest.objects.filter(pk__in=pks).values_list("status", "comment")) == {
        ("rejected", "keep")
    }

    again = [
        deletions.raise_request(
            hv["vm2"],
            sidecar=None,
            endpoint=hv["endpoint"],
            reason="y",
            requested_by=people["requester"],
            run_id="",
        ),
        deletions.raise_request(
            hv["device"],
            sidecar=None,
            endpoint=hv["endpoint"],
            reason="y",
            requested_by=people["approver"],
            run_id="",
        ),
    ]
    result = approver.post(
        "/plugins/hvsync/deletion-requests/approve/",
        {"pk": [r.pk for r in again], "_confirm": "1"},
        follow=True,
    ).content.decode()
    statuses = dict(DeletionRequest.objects.filter(pk__in=[r.pk for r in again]).values_list("pk", "status"))
    assert statuses == {
        again[0].pk: "applied",
        again[1].pk: "pending",
    }  # the approver's own request is refused
    assert "four eyes" in result
    assert not hv["vm2"].__class__.objects.filter(pk=hv["vm2"].pk).exists()


def test_graphql_shows_the_lifecycle_fields(gone_vm, people, guests):
    from netbox_hvsync import deletions

    row = _raise(gone_vm, people["requester"])
    deletions.approve(row, user=people["approver"], comment="gql")
    query = (
        '{ hvsync_deletion_request_list(filters: {status: {exact: "applied"}}) '
        "{ id status identity run_id comment error applied_at deleted_data decided_by { username } "
        "requested_by { username } } }"
    )
    admin = _user("gql-admin", superuser=True)  # nested users need users.view_user
    answer = token_client(admin).post("/graphql/", {"query": query}, format="json")
    assert answer.status_code == 200, answer.content
    [found] = answer.json()["data"]["hvsync_deletion_request_list"]
    assert found["id"] == str(row.pk) and found["status"] == "applied" and found["run_id"] == "run-40"
    assert found["identity"].endswith(f"qemu/{VMID}") and found["comment"] == "gql" and found["applied_at"]
    assert found["decided_by"] == {"username": "second-eyes"} and found["requested_by"] == {
        "username": "sync-runner"
    }
    assert found["deleted_data"]["object"]["display"] == "web-1"
