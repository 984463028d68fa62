"""Opportunistic push (SPEC 4.5): "viewing the dashboard pushes the selected hv endpoint".

The plugin home page is the dashboard. Endpoints are saved without running their post-commit push, so
the backend holds nothing until the page is viewed; then exactly the selected endpoint is there.
"""

from __future__ import annotations

import pytest
import requests
from support import CANDIDATE

pytestmark = pytest.mark.django_db


def _hv_rows(url: str) -> list[dict]:
    return requests.get(url + "/hv/endpoints", headers={"X-Service-API-Key": CANDIDATE}, timeout=5).json()


def _endpoint(name: str, secret: str):
    from netbox_hvsync.models import HvEndpoint

    hv = HvEndpoint(name=name, domain=f"{name}.example.net", username="root@pam", token_name="hvsync")
    hv.token_value = secret
    hv.save()
    return hv


def test_viewing_the_dashboard_pushes_the_selected_endpoint(
    backend,
    ui,
    django_capture_on_commit_callbacks,
):
    from netbox_hvsync.models import BackendEndpoint

    be = BackendEndpoint(name="b", url=backend)
    be.token = CANDIDATE  # verified (bootstraps the backend) before persistence
    be.save()
    with django_capture_on_commit_callbacks(execute=False):  # no post-commit push
        alpha = _endpoint("alpha", "alpha-pve-secret-0001")
        beta = _endpoint("beta", "beta-pve-secret-0002")
    assert _hv_rows(backend) == []

    page = ui.get("/plugins/hvsync/")
    assert page.status_code == 200
    html = page.content.decode()
    assert [r["name"] for r in _hv_rows(backend)] == [f"alpha (inv:{alpha.pk})"]  # first by name
    assert "pushed to the backend" in html
    alpha.refresh_from_db()
    assert alpha.backend_id == _hv_rows(backend)[0]["id"]
    assert "alpha-pve-secret-0001" not in html

    page = ui.get(f"/plugins/hvsync/?hv_endpoint={beta.pk}")
    assert page.status_code == 200
    assert sorted(r["name"] for r in _hv_rows(backend)) == sorted(
        [f"alpha (inv:{alpha.pk})", f"beta (inv:{beta.pk})"]
    )


def test_dashboard_without_a_backend_says_nothing_was_pushed(ui, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        _endpoint("gamma", "gamma-pve-secret-0003")
    page = ui.get("/plugins/hvsync/")
    assert page.status_code == 200
    assert "not pushed: no usable backend endpoint" in page.content.decode()
