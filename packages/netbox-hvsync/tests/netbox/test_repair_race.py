"""Two repair clicks racing queue one repair sync (views/sync_state.py: an advisory lock, then the check
for a running repair again under it).

Both requests run at once, in two threads with their own database connections (a transactional test, so
each sees what the other committed); the backend's reconcile is replaced by a barrier, so both requests
have passed the first "is a repair running?" check before either queues its sync.
"""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

SYNC_STATE = "/plugins/hvsync/sync-state/"


def test_two_racing_repairs_queue_one_sync(monkeypatch):
    from core.models import Job
    from django.db import connection
    from django.test import Client
    from netbox_hvsync.views import sync_state
    from users.models import User

    admin = User.objects.create_user(username="racing-admin", password="pw", is_superuser=True)
    both_checked = threading.Barrier(2, timeout=20)

    def reconcile() -> tuple[bool, str]:
        both_checked.wait()  # each request has passed run_repair's first check
        return True, ""

    monkeypatch.setattr(sync_state, "reconcile_custom_fields", reconcile)
    pages: list[str] = []
    errors: list[BaseException] = []

    def click() -> None:
        try:
            client = Client()
            client.force_login(admin)
            pages.append(client.post(SYNC_STATE, follow=True).content.decode())
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    repairs = [j for j in Job.objects.filter(name="hvsync sync") if j.data["sync"].get("repair")]
    assert len(repairs) == 1
    assert sum("Repair queued" in page for page in pages) == 1
    assert sum("Repair not started: a repair sync is already running" in page for page in pages) == 1
