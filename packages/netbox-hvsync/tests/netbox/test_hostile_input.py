"""Fail closed at the edge (issue 12): server-owned key state, field-keyed URL refusals, numbers in ASCII.

Disabled rows are used where a save must not dial out (SPEC 5.2.8: a disabled row makes no request), so
each refusal here is the plugin's own validation, not a backend's answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import API

pytestmark = pytest.mark.django_db

BACKENDS = API + "backend-endpoints/"

#: The shared corpus (73 URLs in 7 groups): "https://host:99999" answered 500 (an unchecked
#: `urlsplit().port`), other refusals a bare {"detail"}, and "https://[fd00::1]x" or "https://host:" were
#: accepted before.
CORPUS = json.loads((Path(__file__).parents[1] / "hostile-urls.json").read_text())
HOSTILE_URLS = [url for kind, urls in CORPUS.items() if not kind.startswith("_") for url in urls]


def _backend(api, **fields):
    return api.post(BACKENDS, {"name": "b", "enabled": False, **fields}, format="json")


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_hostile_backend_url_is_a_field_error_and_nothing_is_written(api, url):
    from netbox_hvsync.models import BackendEndpoint

    refused = _backend(api, backend_url=url)
    assert refused.status_code == 400, (url, refused.status_code, refused.content[:300])
    assert list(refused.json()) == ["backend_url"], refused.content
    assert not BackendEndpoint.objects.exists()


def test_key_state_and_fingerprint_are_server_owned_on_rest(api):
    from netbox_hvsync.models import BackendEndpoint

    forged = {"key_state": "adopted", "key_fingerprint": "v1:forged"}
    created = _backend(api, backend_url="https://hvsync.example.net:8800", token="k" * 40, **forged)
    assert created.status_code == 201, created.content
    assert created.json()["key_state"]["value"] == "pending" and created.json()["key_fingerprint"] == ""
    pk = created.json()["id"]
    patched = api.patch(f"{BACKENDS}{pk}/", forged, format="json")
    assert patched.status_code == 200, patched.content
    row = BackendEndpoint.objects.get(pk=pk)
    assert (row.key_state, row.key_fingerprint) == ("pending", "")
    put = api.put(f"{BACKENDS}{pk}/", {"name": "b", "backend_url": row.url, **forged}, format="json")
    assert put.status_code == 200, put.content
    row.refresh_from_db()
    assert (row.key_state, row.key_fingerprint) == ("pending", "")


def test_key_state_and_fingerprint_are_not_on_the_edit_form(ui):
    from netbox_hvsync.models import BackendEndpoint

    form = {"name": "b", "url": "https://hvsync.example.net:8800", "port": 8800, "verify_ssl": "on"}
    form_page = ui.get("/plugins/hvsync/backend-endpoints/add/").content.decode()
    assert 'name="key_state"' not in form_page and 'name="key_fingerprint"' not in form_page
    saved = ui.post(
        "/plugins/hvsync/backend-endpoints/add/", {**form, "key_state": "adopted", "key_fingerprint": "x"}
    )
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    row = BackendEndpoint.objects.get(name="b")
    assert (row.key_state, row.key_fingerprint) == ("pending", "")


def test_edit_form_names_the_url_field_for_a_port_out_of_range(ui):
    from netbox_hvsync.models import BackendEndpoint

    form = {"name": "b", "url": "https://host:99999", "port": 8800}
    page = ui.post("/plugins/hvsync/backend-endpoints/add/", form)
    assert page.status_code == 200 and list(page.context["form"].errors) == ["url"]
    assert not BackendEndpoint.objects.exists()


@pytest.mark.parametrize("value", ["²", "\u0661", "99999999999999999999999", "-1"])
def test_dashboard_endpoint_choice_in_other_digits_is_not_a_500(ui, value):
    assert ui.get("/plugins/hvsync/", {"hv_endpoint": value}).status_code == 200


def _garble(model, pk, column):
    """What an encryption-key change looks like to the plugin: ciphertext the configured key cannot open."""
    model.objects.filter(pk=pk).update(**{column: "gAAAAABnot-a-token-of-this-key"})


def test_home_page_shows_an_undecryptable_endpoint_instead_of_a_500(ui, hv):
    from netbox_hvsync.backend.push import push_hv
    from netbox_hvsync.models import HvEndpoint

    _garble(HvEndpoint, hv["endpoint"].pk, "token_value_ciphertext")
    page = ui.get("/plugins/hvsync/", {"hv_endpoint": hv["endpoint"].pk})
    assert page.status_code == 200  # no backend configured: nothing is pushed, and nothing breaks
    result = push_hv(None, HvEndpoint.objects.get(pk=hv["endpoint"].pk))  # type: ignore[arg-type]
    assert result.ok is False and "cannot be decrypted" in result.error and result.status is None


def test_sync_job_with_undecryptable_credentials_fails_by_name_with_its_sync_block(hv):
    """The job decrypted before its try: it errored with a bare exception and no sync block."""
    from core.models import Job
    from netbox_hvsync.jobs import SyncJob, enqueue_sync
    from netbox_hvsync.models import HvEndpoint

    _garble(HvEndpoint, hv["endpoint"].pk, "token_value_ciphertext")
    queued = enqueue_sync(sync_types=["storage"], hv_endpoint_ids=[hv["endpoint"].pk])
    SyncJob.handle(queued, sync=queued.data["sync"])
    job = Job.objects.get(pk=queued.pk)
    assert job.status == "failed", job.status
    assert "Proxmox endpoint 'pve-a'" in job.error and "cannot be decrypted" in job.error
    block = job.data["sync"]
    assert block["errors"] == [job.error] and block["sync_types"] == ["storage"]


def test_cancelling_a_sync_job_asks_its_backend_to_stop_the_runs(api, backend):
    """Cancelling the NetBox job used to leave the backend run writing; the view now calls
    POST /sync/cancel with the job's run id (the backend side is tested in test_leases.py)."""
    from conftest import CANDIDATE
    from core.models import Job
    from netbox_hvsync.jobs import enqueue_sync
    from netbox_hvsync.models import BackendEndpoint

    BackendEndpoint.objects.create(name="b", url=backend, token=CANDIDATE)  # adopted (bootstraps it)
    assert BackendEndpoint.objects.get(name="b").key_state == "adopted"
    queued = enqueue_sync(sync_types=["storage"])
    response = api.post(f"{API}jobs/{queued.pk}/cancel/")
    assert response.status_code == 200, response.content
    job = Job.objects.get(pk=queued.pk)
    messages = [entry["message"] for entry in job.log_entries]
    assert "backend asked to stop this job's runs (0 stage lease(s))" in messages, messages
    assert CANDIDATE not in json.dumps(job.log_entries, default=str)
