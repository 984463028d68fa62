"""SPEC 2.6 race (issue 39), against a real backend: a template-build revocation saved after a sync job read
its hv records and before its preflight pushed them must not be re-granted by that push."""

from __future__ import annotations

import logging

import pytest
import requests
from support import CANDIDATE

pytestmark = pytest.mark.django_db

HEADERS = {"X-Service-API-Key": CANDIDATE}


def _backend_row(backend: str, pk: int) -> dict:
    rows = requests.get(backend + "/hv/endpoints", headers=HEADERS, timeout=5).json()
    return next(r for r in rows if r["name"].endswith(f"(inv:{pk})"))


def test_a_revocation_saved_after_the_job_read_its_records_stays_revoked(
    backend, superuser, django_capture_on_commit_callbacks
):
    from netbox_hvsync.backend.push import hv_record, inventory_record
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.models import BackendEndpoint, HvEndpoint, InventoryEndpoint
    from netbox_hvsync.sync.runner import SyncRun
    from sync_runs import make_job

    commit = django_capture_on_commit_callbacks
    port = int(backend.rsplit(":", 1)[1])
    row = BackendEndpoint(name="b", url="http://127.0.0.1", port=port)
    row.token = CANDIDATE
    row.save()
    inv = InventoryEndpoint(name="nb", domain="nb.example.net", port=8000, scheme="http", token_key="k1")
    inv.token = "nb-token-secret-" + "7" * 24
    hv = HvEndpoint(
        name="pve", domain="pve.example.net", username="root@pam", token_name="hv", allow_template_builds=True
    )
    hv.token_value = "pve-token-secret-0001"
    with commit(execute=True):
        inv.save()
        hv.save()
    hv.refresh_from_db()
    assert hv.template_build_grant_confirmed and _backend_row(backend, hv.pk)["allow_template_builds"]

    # the job starts: it reads its records (the grant still true) ...
    inventory_records = [inventory_record(inv)]
    hv_records = [hv_record(HvEndpoint.objects.select_related("ip_address").get(pk=hv.pk))]
    assert hv_records[0].allow_template_builds is True
    # ... an operator revokes the grant meanwhile; the save's own push revokes it on the backend ...
    hv.allow_template_builds = False
    with commit(execute=True):
        hv.save()
    assert _backend_row(backend, hv.pk)["allow_template_builds"] is False
    # ... then the job's preflight pushes.
    run = SyncRun(make_job(user=superuser), logging.getLogger("test"), {"endpoints": {}})
    resolved = resolve_backend()
    try:
        run.preflight(resolved, inventory_records, hv_records)
    finally:
        resolved.transport.close()

    assert _backend_row(backend, hv.pk)["allow_template_builds"] is False  # not re-granted
    hv.refresh_from_db()
    assert hv.allow_template_builds is False and hv.template_build_grant_confirmed is False
    assert run.block["preflight"]["hv_pushes"][hv.pk]["ok"] is True


def test_the_push_reads_the_row_under_a_lock_held_until_the_result_is_recorded(
    backend, superuser, django_capture_on_commit_callbacks, monkeypatch
):
    """The re-read is `SELECT ... FOR UPDATE`, and the push and the bookkeeping run inside its transaction."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from netbox_hvsync.backend.push import hv_record, inventory_record
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.models import BackendEndpoint, HvEndpoint, InventoryEndpoint
    from netbox_hvsync.sync import preflight as preflight_module
    from netbox_hvsync.sync.runner import SyncRun
    from sync_runs import make_job

    commit = django_capture_on_commit_callbacks
    port = int(backend.rsplit(":", 1)[1])
    row = BackendEndpoint(name="b", url="http://127.0.0.1", port=port)
    row.token = CANDIDATE
    row.save()
    inv = InventoryEndpoint(name="nb", domain="nb.example.net", port=8000, scheme="http", token_key="k1")
    inv.token = "nb-token-secret-" + "7" * 24
    hv = HvEndpoint(name="pve", domain="pve.example.net", username="root@pam", token_name="hv")
    hv.token_value = "pve-token-secret-0001"
    with commit(execute=True):
        inv.save()
        hv.save()

    depth: list[int] = []
    original = preflight_module.record_hv_push

    def probe(record, result):
        depth.append(len(connection.savepoint_ids))  # inside the locking atomic block (a savepoint here)
        return original(record, result)

    monkeypatch.setattr(preflight_module, "record_hv_push", probe)
    run = SyncRun(make_job(user=superuser), logging.getLogger("test"), {"endpoints": {}})
    resolved = resolve_backend()
    outside = len(connection.savepoint_ids)
    try:
        with CaptureQueriesContext(connection) as queries:
            run.preflight(resolved, [inventory_record(inv)], [hv_record(HvEndpoint.objects.get(pk=hv.pk))])
    finally:
        resolved.transport.close()
    table = HvEndpoint._meta.db_table
    locked = [q["sql"] for q in queries.captured_queries if table in q["sql"] and "FOR UPDATE" in q["sql"]]
    assert len(locked) == 1, locked
    assert depth == [outside + 1]
