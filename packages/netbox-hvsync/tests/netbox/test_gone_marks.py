"""Gone from Proxmox in NetBox (issue 40): the endpoint's gone settings, `gone_since` and `last_seen` on
the sync-state records, the `gone` filters, and the policy applied on a sidecar's gone transition."""

from __future__ import annotations

import pytest
from support import API

pytestmark = pytest.mark.django_db

ENDPOINTS = f"{API}hv-endpoints/"
VM_STATES = f"{API}synced-virtual-machines/"


def sidecar(hv, vm, vmid: int, **fields):
    from netbox_hvsync import models

    return models.SyncedVirtualMachine.objects.create(
        endpoint=hv["endpoint"], virtual_machine=vm, vmid=vmid, **fields
    )


def patch(api, url: str, body: dict):
    answer = api.patch(url, body, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_endpoint_gone_settings_round_trip_and_are_validated(api, hv):
    url = f"{ENDPOINTS}{hv['endpoint'].pk}/"
    fresh = api.get(url).json()
    assert (fresh["gone_policy"]["value"], fresh["gone_status"], fresh["gone_guard_share"]) == (
        "keep",
        "",
        0.3,
    )
    assert fresh["auto_approve_deletions"] is False

    row = patch(
        api,
        url,
        {
            "gone_policy": "status",
            "gone_status": "decommissioning",
            "gone_guard_share": 0.5,
            "auto_approve_deletions": True,
        },
    )
    assert (row["gone_policy"]["value"], row["gone_status"], row["gone_guard_share"]) == (
        "status",
        "decommissioning",
        0.5,
    )
    assert row["auto_approve_deletions"] is True
    listed = api.get(ENDPOINTS, {"gone_policy": "status", "auto_approve_deletions": "true"}).json()["results"]
    assert [r["id"] for r in listed] == [hv["endpoint"].pk]

    for body, field in [
        ({"gone_guard_share": 1.5}, "gone_guard_share"),
        ({"gone_guard_share": -0.1}, "gone_guard_share"),
        ({"gone_status": "exploded"}, "gone_status"),
        ({"gone_status": ""}, "gone_status"),  # the status policy needs one
        ({"gone_policy": "delete-now"}, "gone_policy"),
    ]:
        refused = api.patch(url, body, format="json")
        assert refused.status_code == 400 and field in refused.json(), (body, refused.content)


def test_gone_since_last_seen_and_the_gone_filter(api, hv, netbox_objects):
    from django.utils.dateparse import parse_datetime

    present = sidecar(hv, netbox_objects["vm1"], 100, last_seen=parse_datetime("2026-11-20T10:00:00Z"))
    gone = sidecar(hv, netbox_objects["vm2"], 101, last_seen=parse_datetime("2026-11-20T10:00:00Z"))
    patch(api, f"{VM_STATES}{gone.pk}/", {"gone_since": "2026-11-21T10:00:00Z", "last_run_id": "r-2"})
    # the endpoint's last complete read: later than either sidecar's last write
    hv["hv_cluster"].last_complete_read = parse_datetime("2026-11-22T10:00:00Z")
    hv["hv_cluster"].save()

    rows = {r["id"]: r for r in api.get(VM_STATES).json()["results"]}
    assert parse_datetime(rows[present.pk]["last_seen"]) == parse_datetime("2026-11-22T10:00:00Z")
    assert rows[present.pk]["gone_since"] is None
    # gone: last_seen froze at the endpoint's last complete read before the mark (none then: its own)
    assert parse_datetime(rows[gone.pk]["last_seen"]) == parse_datetime("2026-11-20T10:00:00Z")
    assert parse_datetime(rows[gone.pk]["gone_since"]) == parse_datetime("2026-11-21T10:00:00Z")

    assert [r["id"] for r in api.get(VM_STATES, {"gone": "true"}).json()["results"]] == [gone.pk]
    assert [r["id"] for r in api.get(VM_STATES, {"gone": "false"}).json()["results"]] == [present.pk]
    storage = f"{API}storage/"
    patch(api, f"{storage}{hv['pbs'].pk}/", {"gone_since": "2026-11-21T10:00:00Z"})
    assert [r["id"] for r in api.get(storage, {"gone": "true"}).json()["results"]] == [hv["pbs"].pk]


def test_the_status_policy_sets_the_status_once_and_restores_it(api, hv, netbox_objects):
    from core.models import ObjectChange
    from netbox_hvsync.models import HvEndpoint, SyncedVirtualMachine

    HvEndpoint.objects.filter(pk=hv["endpoint"].pk).update(gone_policy="status", gone_status="offline")
    vm = netbox_objects["vm1"]
    assert vm.status == "active"
    state = sidecar(hv, vm, 100)
    url = f"{VM_STATES}{state.pk}/"

    patch(api, url, {"gone_since": "2026-11-21T10:00:00Z"})
    vm.refresh_from_db()
    assert vm.status == "offline"
    assert SyncedVirtualMachine.objects.get(pk=state.pk).gone_prior_status == "active"
    changed = ObjectChange.objects.filter(
        changed_object_id=vm.pk, changed_object_type__model="virtualmachine"
    )
    assert changed.count() == 1 and changed.get().postchange_data["status"] == "offline"
    # an unrelated change of the marked sidecar is no second transition
    patch(api, url, {"node_name": "pve2"})
    assert changed.count() == 1

    patch(api, url, {"gone_since": None})
    vm.refresh_from_db()
    assert vm.status == "active" and SyncedVirtualMachine.objects.get(pk=state.pk).gone_prior_status == ""

    # someone changed the status while it was gone: theirs stays
    patch(api, url, {"gone_since": "2026-11-23T10:00:00Z"})
    vm.refresh_from_db()
    vm.snapshot()
    vm.status = "planned"
    vm.save()
    patch(api, url, {"gone_since": None})
    vm.refresh_from_db()
    assert vm.status == "planned"


def test_the_keep_policy_changes_nothing_but_the_mark(api, hv, netbox_objects):
    from netbox_hvsync.models import DeletionRequest

    vm = netbox_objects["vm1"]
    state = sidecar(hv, vm, 100)
    patch(api, f"{VM_STATES}{state.pk}/", {"gone_since": "2026-11-21T10:00:00Z"})
    vm.refresh_from_db()
    assert vm.status == "active" and not DeletionRequest.objects.exists()


def test_request_deletion_raises_one_request_and_a_return_withdraws_it(api, hv, netbox_objects):
    from netbox_hvsync.models import DeletionRequest, HvEndpoint

    HvEndpoint.objects.filter(pk=hv["endpoint"].pk).update(gone_policy="request-deletion")
    vm = netbox_objects["vm1"]
    state = sidecar(hv, vm, 100)
    url = f"{VM_STATES}{state.pk}/"
    patch(api, url, {"gone_since": "2026-11-21T10:00:00Z", "last_run_id": "run-gone"})
    [request] = DeletionRequest.objects.all()
    assert (request.object_id, request.status) == (vm.pk, "pending")
    patch(api, url, {"node_name": "pve2"})
    assert DeletionRequest.objects.count() == 1

    patch(api, url, {"gone_since": None})
    request.refresh_from_db()
    assert request.status == "withdrawn"
    vm.refresh_from_db()  # still there: nothing is deleted without a decision


def test_delete_stale_asks_for_a_request_under_the_keep_policy(api, hv, netbox_objects):
    from netbox_hvsync.models import DeletionRequest

    state = sidecar(hv, netbox_objects["vm2"], 101)
    patch(api, f"{VM_STATES}{state.pk}/", {"gone_since": "2026-11-21T10:00:00Z", "gone_request": True})
    [request] = DeletionRequest.objects.all()
    assert request.object_id == netbox_objects["vm2"].pk and request.status == "pending"


def test_graphql_answers_the_gone_fields_and_filters_by_them(api, hv, netbox_objects):
    import json

    present = sidecar(hv, netbox_objects["vm1"], 100)
    gone = sidecar(hv, netbox_objects["vm2"], 101)
    patch(api, f"{VM_STATES}{gone.pk}/", {"gone_since": "2026-11-21T10:00:00Z"})

    def data(query: str) -> dict:
        answer = api.post("/graphql/", {"query": query}, format="json")
        body = json.loads(answer.content)
        assert answer.status_code == 200 and "errors" not in body, body
        return body["data"]

    rows = data(
        "{ hvsync_synced_virtual_machine_list { id vmid gone_since gone_request gone_prior_status } }"
    )
    by_id = {int(r["id"]): r for r in rows["hvsync_synced_virtual_machine_list"]}
    assert by_id[present.pk]["gone_since"] is None and by_id[gone.pk]["gone_since"].startswith("2026-11-21")
    marked = data("{ hvsync_synced_virtual_machine_list(filters: {gone_since: {is_null: false}}) { id } }")
    assert [int(r["id"]) for r in marked["hvsync_synced_virtual_machine_list"]] == [gone.pk]
    fields = "gone_policy gone_status gone_guard_share auto_approve_deletions"
    query = f"{{ hvsync_hv_endpoint(id: {hv['endpoint'].pk}) {{ {fields} }} }}"
    endpoint = data(query)["hvsync_hv_endpoint"]
    assert endpoint == {
        "gone_policy": "keep",
        "gone_status": "",
        "gone_guard_share": 0.3,
        "auto_approve_deletions": False,
    }
