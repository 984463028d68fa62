"""Fail closed at the edge (issue 12): server-owned key state, field-keyed URL refusals, numbers in ASCII.

Disabled rows are used where a save must not dial out (SPEC 5.2.8: a disabled row makes no request), so
each refusal here is the plugin's own validation, not a backend's answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import API

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
    from core.models import Job
    from netbox_hvsync.jobs import enqueue_sync
    from netbox_hvsync.models import BackendEndpoint
    from support import CANDIDATE

    BackendEndpoint.objects.create(name="b", url=backend, token=CANDIDATE)  # adopted (bootstraps it)
    assert BackendEndpoint.objects.get(name="b").key_state == "adopted"
    queued = enqueue_sync(sync_types=["storage"])
    response = api.post(f"{API}jobs/{queued.pk}/cancel/")
    assert response.status_code == 200, response.content
    job = Job.objects.get(pk=queued.pk)
    messages = [entry["message"] for entry in job.log_entries]
    assert "backend asked to stop this job's runs (0 stage lease(s))" in messages, messages
    assert CANDIDATE not in json.dumps(job.log_entries, default=str)


def test_null_in_a_partial_or_regex_lookup_is_text_not_a_server_error(api):
    """Found by the REST fuzz run: `status__regex=null` was a 500 (NetBox turns `null` into None for every
    lookup). `null` is NULL for exact matches and plain text elsewhere."""
    from netbox_hvsync.models import BackendEndpoint

    BackendEndpoint.objects.create(name="null-check", url="https://null.example.net", enabled=False)
    for query in ("status__regex=null", "status__ic=null", "status__nisw=null", "name__regex=null"):
        answer = api.get(f"{API}apply-jobs/?{query}")
        assert answer.status_code == 200, (query, answer.content[:300])
    assert api.get(f"{API}backend-endpoints/?name__ic=null").json()["count"] == 1  # text: matches the name
    assert api.get(f"{API}backend-endpoints/?name__regex=^null-").json()["count"] == 1
    assert api.get(f"{API}backend-endpoints/?name=null").json()["count"] == 0  # exact: NULL, not text


def test_a_date_time_filter_with_an_offset_postgresql_refuses_is_a_400(api):
    """Found by the REST fuzz run: `created=...+18:23` reached PostgreSQL and answered 500."""
    answer = api.get(f"{API}apply-jobs/?created=4506-08-13T08:00:49%2B18:23")
    assert answer.status_code == 400
    assert "created" in answer.json() and "UTC offset" in json.dumps(answer.json())
    assert api.get(f"{API}apply-jobs/?created__gte=2026-01-01T00:00:00%2B15:59").status_code == 200


@pytest.mark.parametrize("attrs", [{"address": [None, None]}, {"address": "not-an-ip"}, {"id": "x" * 30}])
def test_a_related_object_given_by_unstorable_attributes_is_a_field_error(api, attrs):
    """Found by the REST fuzz run: NetBox looked `{"address": [null, null]}` up in PostgreSQL: a 500."""
    from netbox_hvsync.models import BackendEndpoint

    answer = api.post(
        f"{API}backend-endpoints/",
        [{"name": "by-attrs", "enabled": False, "port": 8800, "ip_address": attrs}],
        format="json",
    )
    assert answer.status_code == 400, answer.content[:300]
    assert "ip_address" in json.dumps(answer.json())
    assert not BackendEndpoint.objects.filter(name="by-attrs").exists()
    assert api.get(f"{API}backend-endpoints/").status_code == 200  # the request's transaction is intact


@pytest.mark.parametrize("tag", [{"name": "\x00x", "slug": "x"}, {"slug": ["a", None]}, {"id": "x" * 30}])
def test_a_tag_given_by_unstorable_attributes_is_a_field_error(api, tag):
    """Found by the REST fuzz run: a NUL in a tag's name went to PostgreSQL in NetBox's tag lookup: a 500."""
    from netbox_hvsync.models import BackendEndpoint

    answer = api.post(
        f"{API}backend-endpoints/",
        [{"name": "by-tag", "enabled": False, "port": 8800, "tags": [tag]}],
        format="json",
    )
    assert answer.status_code == 400, answer.content[:300]
    assert "tags" in json.dumps(answer.json())
    assert not BackendEndpoint.objects.filter(name="by-tag").exists()
    assert api.get(f"{API}backend-endpoints/").status_code == 200  # the request's transaction is intact


def test_a_number_field_with_choices_has_no_text_lookups(api):
    """Found by the REST fuzz run: `token_version__ie=2` and `token_version__regex=2` reached PostgreSQL as
    text operators on a number column: a 500. Such lookups are not offered; exact and `__n` still work."""
    from netbox_hvsync.filtersets import InventoryEndpointFilterSet

    offered = set(InventoryEndpointFilterSet.base_filters)
    assert {"token_version", "token_version__n"} <= offered
    assert not {"token_version__ie", "token_version__regex", "token_version__ic"} & offered
    for query in ("token_version__ie=2", "token_version__regex=2", "token_version=2", "token_version__n=1"):
        answer = api.get(f"{API}inventory-endpoints/?{query}")
        assert answer.status_code == 200, (query, answer.content[:300])
    assert "name__ic" in offered and "name__regex" in offered  # text fields keep theirs


@pytest.mark.parametrize("name", ["node_id", "cluster_id", "hv_endpoint_id"])
def test_null_in_a_sync_job_object_filter_is_not_a_server_error(api, name):
    """Found by the REST fuzz run: `sync-jobs/?node_id=null` reached the database as an id: a 500."""
    answer = api.get(f"{API}sync-jobs/?{name}=null")
    assert answer.status_code == 200, answer.content[:300]
    assert answer.json()["count"] == api.get(f"{API}sync-jobs/").json()["count"]
