"""The apply path (`/api/plugins/hvsync/change-sets/`) in real NetBox: what lands, what the changelog,
search, validation, permissions, events and branches see (docs/apply-path.md)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from support import token_client

ROUTE = "/api/plugins/hvsync/change-sets/"
RECORDED: list[list[dict[str, Any]]] = []


def record_events(events: list[dict[str, Any]]) -> None:
    """An extra EVENTS_PIPELINE step: what NetBox flushed to its event rules after the request."""
    RECORDED.append(list(events))


@pytest.fixture
def recorded_events(settings) -> list[list[dict[str, Any]]]:
    RECORDED.clear()
    settings.EVENTS_PIPELINE = [*settings.EVENTS_PIPELINE, f"{__name__}.record_events"]
    return RECORDED


@pytest.fixture
def cluster(db):
    from virtualization.models import Cluster, ClusterType

    ctype = ClusterType.objects.create(name="Proxmox VE", slug="proxmox-ve")
    return Cluster.objects.create(name="cs-cluster", type=ctype)


def body(*operations: dict[str, Any], set_id: str | None = None) -> dict[str, Any]:
    return {"version": 1, "id": set_id or str(uuid.uuid4()), "operations": list(operations)}


def vm(name: str, cluster: Any, ref: str | None = None, **data: Any) -> dict[str, Any]:
    op: dict[str, Any] = {
        "op": "create",
        "path": "virtualization/virtual-machines",
        "data": {"name": name, "cluster": cluster.pk, "status": "active", **data},
    }
    if ref:
        op["ref"] = ref
    return op


def test_discovery_names_the_version_the_paths_and_the_limit(api):
    answer = api.get(ROUTE)
    assert answer.status_code == 200, answer.content
    offer = answer.json()
    assert offer["enabled"] is True
    assert offer["versions"] == [1]
    assert offer["max_operations"] == 1000
    assert "virtualization/virtual-machines" in offer["paths"]
    assert "plugins/hvsync/synced-virtual-machines" in offer["paths"]


def test_a_change_set_lands_whole_with_references_one_request_id_and_changelog_rows(
    api, cluster, django_capture_on_commit_callbacks
):
    from core.models import ObjectChange
    from virtualization.models import VirtualMachine, VMInterface

    set_id = str(uuid.uuid4())
    with django_capture_on_commit_callbacks(execute=True):
        answer = api.post(
            ROUTE,
            body(
                vm("cs-vm-1", cluster, ref="vm1"),
                {
                    "op": "create",
                    "path": "virtualization/interfaces",
                    "data": {"virtual_machine": {"$ref": "vm1"}, "name": "net0"},
                },
                set_id=set_id,
            ),
            format="json",
        )
    assert answer.status_code == 200, answer.content
    outcome = answer.json()
    assert outcome["applied"] is True and outcome["errors"] == [] and outcome["id"] == set_id
    vm_id, iface_id = (r["id"] for r in outcome["results"])
    iface = VMInterface.objects.get(pk=iface_id)
    assert iface.virtual_machine_id == vm_id == VirtualMachine.objects.get(name="cs-vm-1").pk
    changes = ObjectChange.objects.filter(request_id=set_id).order_by("pk")
    assert [(c.changed_object_type.model, c.changed_object_id, c.action) for c in changes] == [
        ("virtualmachine", vm_id, "create"),
        ("vminterface", iface_id, "create"),
    ]
    assert changes[0].postchange_data["name"] == "cs-vm-1"
    # the search index has the new VM right after the change set (NetBox's global search)
    from netbox.search.backends import search_backend

    hits = search_backend.search("cs-vm-1", user=changes[0].user)
    assert any(getattr(hit, "object_id", None) == vm_id for hit in hits)


def test_search_indexing_of_a_change_set_is_one_batch(api, cluster, django_capture_on_commit_callbacks):
    """NetBox 4.7 indexes each committed transaction in one "Search cache update" job: a change set is one
    batch holding every object it wrote (REST writes make one per object). 4.5 and 4.6 index inline."""
    import importlib.util

    from extras.models import Tag

    Tag.objects.create(name="cs-tag", slug="cs-tag")
    operations = []
    for i in range(3):  # what a sync writes for a guest: the VM, its NICs (with MACs), disks and IP
        operations.append(vm(f"cs-idx-{i}", cluster, ref=f"vm{i}", tags=[{"slug": "cs-tag"}]))
        operations.append(
            {
                "op": "create",
                "path": "virtualization/interfaces",
                "ref": f"nic{i}",
                "data": {
                    "virtual_machine": {"$ref": f"vm{i}"},
                    "name": "net0",
                    "mac_address": f"BC:24:11:00:00:0{i}",
                },
            }
        )
        operations.append(
            {
                "op": "create",
                "path": "virtualization/virtual-disks",
                "data": {"virtual_machine": {"$ref": f"vm{i}"}, "name": "scsi0", "size": 10},
            }
        )
        operations.append(
            {
                "op": "create",
                "path": "ipam/ip-addresses",
                "data": {
                    "address": f"192.0.2.{i + 1}/24",
                    "assigned_object_type": "virtualization.vminterface",
                    "assigned_object_id": {"$ref": f"nic{i}"},
                },
            }
        )
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        answer = api.post(ROUTE, body(*operations), format="json")
    assert answer.status_code == 200, answer.content
    batches = [getattr(c, "_netbox_search_flush_batch", None) for c in callbacks]
    batches = [b for b in batches if b is not None]
    if importlib.util.find_spec("netbox.search.deferred") is None:
        assert batches == []
    else:
        assert len(batches) == 1
        written = {r["id"] for r in answer.json()["results"]}
        assert written <= {pk for (_, pk) in batches[0]}  # every object (and the MACs NetBox made)


def test_config_context_render_is_queued_once_per_change_set(
    api, cluster, django_capture_on_commit_callbacks
):
    """NetBox 4.7 invalidates a VM's cached config context on every save and tag change and queues its
    render sweep after commit each time; a change set queues it once, and the VMs' caches are still
    invalidated (4.5 and 4.6 render config context on read and queue nothing)."""
    import importlib.util

    from extras.models import Tag
    from virtualization.models import VirtualMachine

    Tag.objects.create(name="cs-cc", slug="cs-cc")
    operations = [vm(f"cs-cc-{i}", cluster, tags=[{"slug": "cs-cc"}]) for i in range(3)]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        answer = api.post(ROUTE, body(*operations), format="json")
    assert answer.status_code == 200, answer.content
    sweeps = [c for c in callbacks if "invalidate_config_context_for_objects" in c.__qualname__]
    if importlib.util.find_spec("extras.cache") is None:
        assert sweeps == []
        return
    assert len(sweeps) == 1
    vms = VirtualMachine.objects.filter(name__startswith="cs-cc-")
    assert vms.count() == 3
    assert all(v._config_context_data is None and v._config_context_generation > 0 for v in vms)


def test_an_operation_naming_a_failed_create_fails_too_and_nothing_lands(api, cluster):
    from virtualization.models import VirtualMachine

    answer = api.post(
        ROUTE,
        body(
            {
                "op": "create",
                "path": "virtualization/virtual-machines",
                "ref": "bad",
                "data": {"name": "cs-x"},
            },
            {
                "op": "update",
                "path": "virtualization/virtual-machines",
                "id": {"$ref": "bad"},
                "data": {"comments": "y"},
            },
            vm("cs-fine", cluster),
        ),
        format="json",
    )
    assert answer.status_code == 400
    errors = {e["index"]: e for e in answer.json()["errors"]}
    assert sorted(errors) == [0, 1] and "whose create failed" in errors[1]["detail"]
    assert not VirtualMachine.objects.filter(name__startswith="cs-").exists()


def test_updates_and_deletes_carry_prechange_data(api, cluster):
    from core.models import ObjectChange
    from virtualization.models import VirtualMachine

    keep = VirtualMachine.objects.create(name="cs-keep", cluster=cluster)
    gone = VirtualMachine.objects.create(name="cs-gone", cluster=cluster)
    keep.snapshot()
    answer = api.post(
        ROUTE,
        body(
            {
                "op": "update",
                "path": "virtualization/virtual-machines",
                "id": keep.pk,
                "data": {"comments": "hello"},
            },
            {"op": "delete", "path": "virtualization/virtual-machines", "id": gone.pk},
        ),
        format="json",
    )
    assert answer.status_code == 200, answer.content
    set_id = answer.json()["id"]
    keep.refresh_from_db()
    assert keep.comments == "hello"
    assert not VirtualMachine.objects.filter(pk=gone.pk).exists()
    update, delete = ObjectChange.objects.filter(request_id=set_id).order_by("pk")
    assert update.action == "update" and update.prechange_data["comments"] == ""
    assert update.postchange_data["comments"] == "hello"
    assert delete.action == "delete" and delete.prechange_data["name"] == "cs-gone"


def test_one_invalid_object_rolls_the_whole_batch_back_and_is_reported_by_index(
    api, cluster, recorded_events
):
    from core.models import ObjectChange
    from django.contrib.contenttypes.models import ContentType
    from extras.models import CustomField
    from virtualization.models import VirtualMachine

    field = CustomField.objects.create(name="cs_rank", type="integer", validation_maximum=10)
    field.object_types.set([ContentType.objects.get_for_model(VirtualMachine)])
    answer = api.post(
        ROUTE,
        body(
            vm("cs-good", cluster, custom_fields={"cs_rank": 3}),
            vm("cs-bad-cf", cluster, custom_fields={"cs_rank": 11}),
            {"op": "create", "path": "virtualization/virtual-machines", "data": {"name": "cs-no-home"}},
        ),
        format="json",
    )
    assert answer.status_code == 400, answer.content
    outcome = answer.json()
    assert outcome["applied"] is False and outcome["results"] == []
    errors = {e["index"]: e for e in outcome["errors"]}
    assert sorted(errors) == [1, 2]
    assert "cs_rank" in str(errors[1]["errors"])  # custom-field validation names the field
    assert errors[2]["status"] == 400 and "cluster" in str(errors[2]["errors"]).lower()  # the model's clean()
    assert not VirtualMachine.objects.filter(name__startswith="cs-").exists()  # nothing half-written
    assert not ObjectChange.objects.filter(request_id=outcome["id"]).exists()
    assert recorded_events == []  # a rolled-back batch fires no event rules


def test_an_applied_batch_fires_its_events(api, cluster, recorded_events):
    answer = api.post(ROUTE, body(vm("cs-event", cluster)), format="json")
    assert answer.status_code == 200, answer.content
    events = [event for batch in recorded_events for event in batch]
    assert [(e["event_type"], e["data"]["name"]) for e in events] == [("object_created", "cs-event")]
    assert str(events[0]["request"].id) == answer.json()["id"]


def test_the_same_change_set_twice_is_applied_once_and_can_be_read_back(api, cluster):
    from virtualization.models import VirtualMachine

    change_set = body(vm("cs-once", cluster))
    first = api.post(ROUTE, change_set, format="json").json()
    again = api.post(ROUTE, change_set, format="json")
    assert again.status_code == 200
    assert again.json()["replayed"] is True and again.json()["results"] == first["results"]
    assert VirtualMachine.objects.filter(name="cs-once").count() == 1
    read = api.get(f"{ROUTE}{change_set['id']}/")
    assert read.status_code == 200 and read.json()["results"] == first["results"]
    missing = api.get(f"{ROUTE}{uuid.uuid4()}/")
    assert missing.status_code == 404 and missing.json()["applied"] is False


@pytest.mark.parametrize(
    "change_set, field",
    [
        ({"version": 2, "id": str(uuid.uuid4()), "operations": []}, "version"),
        ({"version": 1, "id": "not-a-uuid", "operations": []}, "id"),
        ({"version": 1, "id": str(uuid.uuid4()), "operations": []}, "operations"),
        (body({"op": "create", "path": "users/users", "data": {}}), "operations[0].path"),
        (body({"op": "update", "path": "dcim/sites", "id": 0, "data": {}}), "operations[0].id"),
        (body({"op": "create", "path": "dcim/sites", "data": {"x": {"$ref": "nope"}}}), "operations[0].data"),
        (body({"op": "drop", "path": "dcim/sites"}), "operations[0].op"),
    ],
)
def test_a_body_that_is_not_a_change_set_is_a_400_naming_the_field(api, change_set, field):
    answer = api.post(ROUTE, change_set, format="json")
    assert answer.status_code == 400
    assert answer.json()["field"] == field


def test_object_permissions_of_the_token_user_are_enforced(db, cluster):
    from django.contrib.contenttypes.models import ContentType
    from users.models import ObjectPermission, User
    from virtualization.models import VirtualMachine

    user = User.objects.create_user(username="cs-limited", password="pw")
    permission = ObjectPermission.objects.create(
        name="cs-vms", actions=["add", "view"], constraints={"name__startswith": "ok-"}
    )
    permission.object_types.set([ContentType.objects.get_for_model(VirtualMachine)])
    permission.users.add(user)
    client = token_client(user)
    allowed = client.post(ROUTE, body(vm("ok-1", cluster)), format="json")
    assert allowed.status_code == 200, allowed.content
    refused = client.post(
        ROUTE,
        body(
            vm("ok-2", cluster),
            vm("not-ok", cluster),
            {
                "op": "create",
                "path": "virtualization/interfaces",
                "data": {"virtual_machine": 1, "name": "x"},
            },
        ),
        format="json",
    )
    assert refused.status_code == 403
    assert {e["index"]: e["status"] for e in refused.json()["errors"]} == {1: 403, 2: 403}
    assert sorted(VirtualMachine.objects.values_list("name", flat=True)) == ["ok-1"]
    read_only = token_client(user, write_enabled=False).post(ROUTE, body(vm("ok-3", cluster)), format="json")
    assert read_only.status_code == 403


def test_turned_off_the_route_refuses_and_discovery_says_so(api, cluster, settings):
    settings.PLUGINS_CONFIG = {**settings.PLUGINS_CONFIG, "netbox_hvsync": {"change_sets": False}}
    assert api.get(ROUTE).json()["enabled"] is False
    assert api.post(ROUTE, body(vm("cs-off", cluster)), format="json").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_branched_change_set_writes_in_the_branch_only(cluster):
    from netbox_branching.models import Branch
    from netbox_branching.utilities import activate_branch
    from users.models import User
    from virtualization.models import VirtualMachine

    user = User.objects.create_user(username="cs-branch", password="pw", is_superuser=True)
    branch = Branch(name="cs-branch", owner=user)
    branch.save(provision=False)
    branch.provision(user)
    branch.refresh_from_db()
    client = token_client(user)
    answer = client.post(
        ROUTE, body(vm("cs-branched", cluster)), format="json", HTTP_X_NETBOX_BRANCH=branch.schema_id
    )
    assert answer.status_code == 200, answer.content
    assert not VirtualMachine.objects.filter(name="cs-branched").exists()  # main is untouched
    with activate_branch(branch):
        assert VirtualMachine.objects.filter(name="cs-branched").count() == 1
    assert branch.get_unmerged_changes().count() == 1  # the branch's changelog has it, ready to merge
