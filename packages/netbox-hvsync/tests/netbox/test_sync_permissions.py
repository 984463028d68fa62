"""Who may sync what: REST `sync/schedule/`, the UI schedule form, repair and the full-update button.

Queueing needs `core.add_job` and `netbox_hvsync.view_hvendpoint`; every id of the body is looked up among
the objects the user may view (an id they cannot see is "unknown", like one that does not exist); an
explicitly chosen disabled Proxmox or backend endpoint is refused; no endpoint chosen means the enabled
endpoints the user may view. Users here are real NetBox users holding ObjectPermissions (with
constraints), authenticated with real v2 tokens or sessions.
"""

from __future__ import annotations

import pytest
from support import API, token_client

pytestmark = pytest.mark.django_db

SCHEDULE = API + "sync/schedule/"
UI_SCHEDULE = "/plugins/hvsync/sync/schedule/"
SYNC_STATE = "/plugins/hvsync/sync-state/"


def grant(user, perm: str, constraints=None) -> None:
    from django.contrib.contenttypes.models import ContentType
    from users.models import ObjectPermission

    app, codename = perm.split(".")
    action, model = codename.split("_", 1)
    permission = ObjectPermission.objects.create(
        name=f"{perm}-{user.pk}-{ObjectPermission.objects.count()}", actions=[action], constraints=constraints
    )
    permission.object_types.set([ContentType.objects.get(app_label=app, model=model)])
    permission.users.add(user)


def make_user(name: str, *perms: str, constraints: dict | None = None):
    """A user holding these permissions; `constraints` maps a permission to its ObjectPermission
    constraints (e.g. only the endpoint named pve-a)."""
    from users.models import User

    user = User.objects.create_user(username=name, password="pw")
    for perm in perms:
        grant(user, perm, (constraints or {}).get(perm))
    return user


def session(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def sync_jobs():
    from core.models import Job

    return Job.objects.filter(name="hvsync sync")


@pytest.fixture
def scoped(hv):
    """A user who may queue jobs and view only the Proxmox endpoint pve-a (and its cluster)."""
    user = make_user(
        "scoped-operator",
        "core.add_job",
        "netbox_hvsync.view_hvendpoint",
        "netbox_hvsync.view_hvcluster",
        "virtualization.view_virtualmachine",
        constraints={
            "netbox_hvsync.view_hvendpoint": {"name": "pve-a"},
            "netbox_hvsync.view_hvcluster": {"endpoint__name": "pve-a"},
            "virtualization.view_virtualmachine": {"name": "web-1"},
        },
    )
    return user


@pytest.fixture
def backends(db):
    from netbox_hvsync.models import BackendEndpoint

    enabled = BackendEndpoint.objects.create(name="be-on", url="http://backend-on.invalid", enabled=True)
    disabled = BackendEndpoint.objects.create(name="be-off", url="http://backend-off.invalid", enabled=False)
    return enabled, disabled


def test_add_job_alone_no_longer_schedules(hv):
    user = make_user("jobs-only", "core.add_job")
    response = token_client(user).post(SCHEDULE, {}, format="json")
    assert response.status_code == 403
    assert "netbox_hvsync.view_hvendpoint" in response.json()["detail"]
    assert session(user).get(UI_SCHEDULE).status_code == 403
    assert session(user).post(UI_SCHEDULE, {}).status_code == 403
    assert not sync_jobs().exists()


def test_an_endpoint_the_user_cannot_view_is_unknown_like_a_missing_one(scoped, hv):
    client = token_client(scoped)
    hidden = client.post(SCHEDULE, {"hv_endpoint_ids": [hv["other"].pk]}, format="json")
    missing = client.post(SCHEDULE, {"hv_endpoint_ids": [10**9]}, format="json")
    assert hidden.status_code == missing.status_code == 400
    assert hidden.json() == {"hv_endpoint_ids": [f"Unknown id(s): {hv['other'].pk}"]}
    assert missing.json() == {"hv_endpoint_ids": [f"Unknown id(s): {10**9}"]}
    assert not sync_jobs().exists()


def test_no_endpoint_chosen_means_the_endpoints_the_user_may_view(scoped, hv):
    response = token_client(scoped).post(SCHEDULE, {}, format="json")
    assert response.status_code == 201, response.content
    job = sync_jobs().get()
    assert job.data["sync"]["hv_endpoint_ids"] == [hv["endpoint"].pk]  # not "all": pve-b is not theirs
    assert response.json()["id"] == job.pk


def test_unconstrained_view_keeps_all(hv):
    user = make_user("all-seeing", "core.add_job", "netbox_hvsync.view_hvendpoint")
    assert token_client(user).post(SCHEDULE, {}, format="json").status_code == 201
    assert sync_jobs().get().data["sync"]["hv_endpoint_ids"] == []  # every endpoint, future ones too


def test_no_visible_enabled_endpoint_is_a_400(hv):
    from netbox_hvsync.models import HvEndpoint

    user = make_user(
        "scoped-to-disabled",
        "core.add_job",
        "netbox_hvsync.view_hvendpoint",
        constraints={"netbox_hvsync.view_hvendpoint": {"name": "pve-b"}},
    )
    HvEndpoint.objects.filter(pk=hv["other"].pk).update(enabled=False)
    response = token_client(user).post(SCHEDULE, {}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "hv_endpoint_ids": ["There is no enabled Proxmox endpoint you may view: nothing to sync."]
    }


def test_clusters_vms_and_objects_are_scoped_too(scoped, hv):
    client = token_client(scoped)
    cluster = client.post(SCHEDULE, {"cluster_ids": [hv["other_cluster"].pk]}, format="json")
    assert cluster.status_code == 400
    assert cluster.json() == {"cluster_ids": [f"Unknown id(s): {hv['other_cluster'].pk}"]}
    own = client.post(SCHEDULE, {"cluster_ids": [hv["hv_cluster"].pk]}, format="json")
    assert own.status_code == 201
    vm = client.post(SCHEDULE, {"mode": "selected", "vm_ids": [hv["vm2"].pk]}, format="json")
    assert vm.status_code == 400 and vm.json() == {"vm_ids": [f"Unknown id(s): {hv['vm2'].pk}"]}
    storage = client.post(
        SCHEDULE,
        {"mode": "selected", "batch_object_type": "netbox_hvsync.hvstorage", "object_ids": [hv["local"].pk]},
        format="json",
    )
    assert storage.status_code == 400  # no view permission on storage at all
    assert "object_ids" in storage.json() and str(hv["local"].pk) in storage.json()["object_ids"][0]
    assert sync_jobs().count() == 1


def test_a_backend_the_user_cannot_view_cannot_be_pinned(scoped, hv, backends):
    enabled, _ = backends
    response = token_client(scoped).post(SCHEDULE, {"backend_endpoint_id": enabled.pk}, format="json")
    assert response.status_code == 400
    assert response.json() == {"backend_endpoint_id": [f"Unknown id(s): {enabled.pk}"]}
    grant(scoped, "netbox_hvsync.view_backendendpoint", {"name": "be-on"})
    from users.models import User

    again = token_client(User.objects.get(pk=scoped.pk)).post(
        SCHEDULE, {"backend_endpoint_id": enabled.pk}, format="json"
    )
    assert again.status_code == 201, again.content
    assert sync_jobs().get().data["sync"]["backend_endpoint_id"] == enabled.pk


def test_explicitly_chosen_disabled_endpoints_are_refused(api, hv, backends):
    from netbox_hvsync.models import HvEndpoint

    HvEndpoint.objects.filter(pk=hv["other"].pk).update(enabled=False)
    response = api.post(SCHEDULE, {"hv_endpoint_ids": [hv["endpoint"].pk, hv["other"].pk]}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "hv_endpoint_ids": [
            f"Proxmox endpoint(s) {hv['other'].pk} are disabled: enable them, or leave them out "
            "(a disabled endpoint is never synced)."
        ]
    }
    cluster = api.post(SCHEDULE, {"cluster_ids": [hv["other_cluster"].pk]}, format="json")
    assert cluster.status_code == 400 and "disabled" in cluster.json()["cluster_ids"][0]
    _, disabled = backends
    backend = api.post(SCHEDULE, {"backend_endpoint_id": disabled.pk}, format="json")
    assert backend.status_code == 400
    assert backend.json() == {
        "backend_endpoint_id": [
            f"Backend endpoint {disabled.pk} is disabled: enable it, or leave the choice to the plugin."
        ]
    }
    assert not sync_jobs().exists()


def test_ui_form_offers_and_accepts_only_visible_endpoints(scoped, hv):
    client = session(scoped)
    form = client.get(UI_SCHEDULE)
    assert form.status_code == 200
    hidden = client.post(UI_SCHEDULE, {"hv_endpoints": [hv["other"].pk]})
    assert hidden.status_code == 200 and not sync_jobs().exists()  # the form again, with the error
    queued = client.post(UI_SCHEDULE, {})
    assert queued.status_code == 302
    assert sync_jobs().get().data["sync"]["hv_endpoint_ids"] == [hv["endpoint"].pk]


def test_repair_needs_view_permissions_and_is_scoped(scoped, hv, monkeypatch):
    from netbox_hvsync.views import sync_state

    monkeypatch.setattr(sync_state, "reconcile_custom_fields", lambda: (True, ""))
    old_rule = make_user("old-rule", "core.add_job", "netbox_hvsync.view_backendendpoint")
    text = session(old_rule).post(SYNC_STATE, follow=True).content.decode()
    assert "Repair not started: repair needs the core.add_job and netbox_hvsync.view_hvendpoint" in text
    assert not sync_jobs().exists()

    grant(scoped, "netbox_hvsync.view_backendendpoint")
    text = session(scoped).post(SYNC_STATE, follow=True).content.decode()
    job = sync_jobs().get()
    assert "Repair queued" in text and job.data["sync"]["repair"] is True
    assert job.data["sync"]["hv_endpoint_ids"] == [hv["endpoint"].pk]

    full = session(scoped).post(SYNC_STATE, {"action": "full_sync"}, follow=True).content.decode()
    assert "Full sync queued" in full
    newest = sync_jobs().order_by("-pk").first()
    assert newest.pk != job.pk and newest.data["sync"]["hv_endpoint_ids"] == [hv["endpoint"].pk]
