"""The NetBox under test runs the release it was asked for, with the plugin loaded, migrated and served.

`make test` runs this module on every supported release (the matrix in tools/run-tests.sh), beside the
full sync of the demo cluster in test_sync_job.py.
"""

from __future__ import annotations

import asyncio
import secrets

import pytest
from conftest import PLUGIN_API, NetBox
from hvsync_backend.inventory.releases import parse_version
from netbox_hvsync import __version__ as PLUGIN_VERSION


def test_netbox_runs_the_release_with_the_plugin(netbox: NetBox) -> None:
    assert netbox.version, "the instance's env file names no NetBox release"
    status = netbox.get("status/")
    assert status["netbox-version"].split("-")[0] == netbox.version
    assert status["plugins"].get("netbox_hvsync") == PLUGIN_VERSION
    # the plugin's REST surface answers on this release, with its read-only routes refusing writes
    root = netbox.get(PLUGIN_API)
    assert {"backup-routines", "replications", "sync-jobs", "hv-endpoints"} <= set(root)
    with netbox.client() as c:
        refused = c.post(PLUGIN_API + "sync-jobs/", json={})
    assert refused.status_code == 405, refused.text[:300]


def test_plugin_pages_render(netbox: NetBox) -> None:
    """The plugin's home page and an object list render for a logged-in user on this release."""
    import httpx

    with httpx.Client(base_url=netbox.url, timeout=60, follow_redirects=True) as c:
        login = c.get("/login/")
        token = c.cookies.get("csrftoken")
        assert login.status_code == 200 and token
        done = c.post(
            "/login/",
            data={
                "username": netbox.admin_user,
                "password": netbox.admin_password,
                "csrfmiddlewaretoken": token,
                "next": "/",
            },
            headers={"Referer": netbox.url + "/login/"},
        )
        assert done.status_code == 200
        for path in ("/plugins/hvsync/", "/plugins/hvsync/hv-endpoints/", "/plugins/hvsync/backup-routines/"):
            page = c.get(path)
            assert page.status_code == 200, (path, page.status_code)
            assert "hvsync" in page.text.lower() and "Server Error" not in page.text


@pytest.mark.parametrize("version", [1, 2])
def test_backend_client_reads_and_writes_with_either_token_version(netbox: NetBox, version: int) -> None:
    """The backend's NetBox client authenticates with v1 (`Token <t>`) and v2 (`Bearer nbt_<key>.<t>`)
    tokens on this release, and reads and writes through them."""
    from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig

    admin = netbox.get("users/users/", username=netbox.admin_user)["results"][0]
    ours = secrets.token_hex(20)
    made = netbox.post(
        "users/tokens/",
        {"user": admin["id"], "version": version, "description": f"hvsync v{version} test", "token": ours},
    )
    # 4.5 and 4.6 take the plaintext from the client (4.5's answer does not show it); 4.7 ignores a given
    # one, makes its own and shows it once, in this answer
    plaintext = made["token"] if parse_version(netbox.version) >= (4, 7) else ours
    header = NetBoxConfig.auth_header_for(version, plaintext, made.get("key"))

    async def exercise() -> tuple[str, str]:
        async with NetBoxClient(NetBoxConfig(url=netbox.url, auth_header=header, verify_ssl=False)) as nb:
            release = await nb.release()
            tag = f"hvsync-token-v{version}-{secrets.token_hex(3)}"
            [created] = await nb.bulk_create("extras/tags", [{"name": tag, "slug": tag}])
            assert not isinstance(created, Exception), created
            rows = await nb.list_all("extras/tags", {"slug": tag}, fields=("id", "slug"))
            assert [r["id"] for r in rows] == [created["id"]]
            assert await nb.bulk_delete("extras/tags", [created["id"]]) == [None]
            return str(release), tag

    release, _ = asyncio.run(exercise())
    assert release == netbox.version
    with netbox.client() as c:
        assert c.delete(f"users/tokens/{made['id']}/").status_code == 204
