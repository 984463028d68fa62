"""Privilege separation and the list filters of /access/users, /pools, /storage and /access/acl as
pve-access-control, pve-manager and pve-storage apply them; who may change root@pam (AccessControl.pm,
User.pm, RPCEnvironment.pm)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pve_emulator.testing import running_emulator

ADMIN, ADMIN_PW = "useradmin@pve", "admin-secret-1"
OPS, OPS_PW = "ops@pve", "ops-secret-12"


def _data(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


class Cluster:
    """The emulator, a root token client, and ways to call it as someone else."""

    def __init__(self, url: str, root: httpx.Client) -> None:
        self.url, self.root = url, root
        self.tokens: dict[str, str] = {}

    def token(self, tokenid: str) -> httpx.Client:
        headers = {"Authorization": f"PVEAPIToken={tokenid}={self.tokens[tokenid]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def ticket(self, user: str, password: str) -> httpx.Client:
        login = _data(httpx.post(f"{self.url}/access/ticket", data={"username": user, "password": password}))
        return httpx.Client(
            base_url=self.url,
            cookies={"PVEAuthCookie": login["ticket"]},
            headers={"CSRFPreventionToken": login["CSRFPreventionToken"]},
            timeout=10,
        )

    def acl(self, path: str, role: str, **subject: str) -> None:
        _data(self.root.put("/access/acl", data={"path": path, "roles": role, **subject}))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """useradmin@pve: PVEUserAdmin on /access. ops@pve: PVEAuditor on /, with a privilege-separated token
    (ops@pve!probe) and one that is not (ops@pve!full)."""
    with running_emulator(task_duration=0.01) as pve:
        headers = {"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"}
        with httpx.Client(base_url=pve.api_url, headers=headers, timeout=10) as root:
            env = Cluster(pve.api_url, root)
            for user, password in ((ADMIN, ADMIN_PW), (OPS, OPS_PW)):
                _data(root.post("/access/users", data={"userid": user, "password": password}))
            env.acl("/access", "PVEUserAdmin", users=ADMIN)
            env.acl("/", "PVEAuditor", users=OPS)
            for name, privsep in (("probe", 1), ("full", 0)):
                made = _data(root.post(f"/access/users/{OPS}/token/{name}", data={"privsep": privsep}))
                env.tokens[made["full-tokenid"]] = made["value"]
            yield env


def _lists(client: httpx.Client) -> dict[str, Any]:
    return {
        "users": _data(client.get("/access/users", params={"full": 1})),
        "pools": _data(client.get("/pools")),
        "storage": [s["storage"] for s in _data(client.get("/storage"))],
        "acl": _data(client.get("/access/acl")),
    }


def test_privilege_separated_token_without_acl_lists_nothing(cluster: Cluster) -> None:
    with cluster.token(f"{OPS}!probe") as probe:
        assert _lists(probe) == {"users": [], "pools": [], "storage": [], "acl": []}
        assert probe.get("/pools/production").status_code == 403  # Pool.Audit on /pool/production


def test_token_without_privilege_separation_sees_what_its_user_sees(cluster: Cluster) -> None:
    with cluster.token(f"{OPS}!full") as full, cluster.ticket(OPS, OPS_PW) as user:
        seen, by_user = _lists(full), _lists(user)
    assert seen == by_user
    assert seen["storage"] == ["local", "local-lvm", "ceph-vm", "nfs-backup"]
    assert [p["poolid"] for p in seen["pools"]] == ["lab", "production"]
    assert all("members" not in p for p in seen["pools"])  # the pool index has no members
    ops = next(u for u in seen["users"] if u["userid"] == OPS)
    assert sorted(t["tokenid"] for t in ops["tokens"]) == ["full", "probe"]
    assert {(a["path"], a["ugid"]) for a in seen["acl"]} >= {("/", OPS), ("/access", ADMIN)}


def test_token_acl_is_intersected_with_its_users(cluster: Cluster) -> None:
    cluster.acl("/storage/local", "PVEDatastoreAdmin", tokens=f"{OPS}!probe")
    cluster.acl("/pool/production", "Administrator", tokens=f"{OPS}!probe")
    with cluster.token(f"{OPS}!probe") as probe:
        seen = _lists(probe)
        permissions = _data(probe.get("/access/permissions", params={"path": "/pool/production"}))
    assert seen["storage"] == ["local"]
    assert [p["poolid"] for p in seen["pools"]] == ["production"]
    # Administrator on the pool, but its user (PVEAuditor) has no Permissions.Modify nor Pool.Allocate
    assert seen["acl"] == [] and seen["users"] == []
    assert set(permissions["/pool/production"]) == {
        "Pool.Audit",
        "VM.Audit",
        "Datastore.Audit",
        "Sys.Audit",
    } | {
        "SDN.Audit",
        "Mapping.Audit",
        "VM.GuestAgent.Audit",
    }


def test_user_list_follows_group_privileges(cluster: Cluster) -> None:
    _data(cluster.root.post("/access/groups", data={"groupid": "helpdesk"}))
    _data(cluster.root.post("/access/users", data={"userid": "alice@pve", "groups": "helpdesk"}))
    _data(cluster.root.post("/access/users", data={"userid": "lead@pve", "password": "lead-secret-1"}))
    cluster.acl("/access/groups/helpdesk", "PVEUserAdmin", users="lead@pve")
    with cluster.ticket("lead@pve", "lead-secret-1") as lead:
        assert sorted(u["userid"] for u in _data(lead.get("/access/users"))) == ["alice@pve", "lead@pve"]
        assert (
            lead.put("/access/users/alice@pve", data={"comment": "x", "groups": "helpdesk"}).status_code
            == 200
        )
        assert (
            lead.put("/access/users/alice@pve", data={"comment": "x"}).status_code == 403
        )  # no groups named
        assert (
            lead.put(f"/access/users/{OPS}", data={"comment": "x", "groups": "helpdesk"}).status_code == 403
        )


def test_only_root_changes_roots_password(cluster: Cluster) -> None:
    with cluster.ticket(ADMIN, ADMIN_PW) as admin:
        change = {"userid": "root@pam", "password": "new-root-pw", "confirmation-password": ADMIN_PW}
        refused = admin.put("/access/password", data=change)
        assert refused.status_code == 403 and refused.json()["message"] == "Permission check failed\n"
        unconfirmed = admin.put("/access/password", data={"userid": OPS, "password": "ops-new-pw-1"})
        assert unconfirmed.status_code == 400
        assert unconfirmed.json()["errors"] == {
            "confirmation-password": "password is required to modify user"
        }
        ok = {"userid": OPS, "password": "ops-new-pw-1", "confirmation-password": ADMIN_PW}
        _data(admin.put("/access/password", data=ok))
    cluster.ticket(OPS, "ops-new-pw-1").close()  # the new password logs in
    with cluster.ticket(OPS, "ops-new-pw-1") as ops:  # PVEAuditor: no User.Modify anywhere
        other = {"userid": ADMIN, "password": "whatever-1", "confirmation-password": "ops-new-pw-1"}
        assert ops.put("/access/password", data=other).status_code == 403
        own = {"userid": OPS, "password": OPS_PW, "confirmation-password": "ops-new-pw-1"}
        _data(ops.put("/access/password", data=own))


def test_user_admin_may_disable_root_and_make_tokens_for_it_as_proxmox_allows(cluster: Cluster) -> None:
    """User.pm's update_user and generate_token check only `userid-group` (User.Modify on /access/groups):
    Proxmox lets a PVEUserAdmin there disable root@pam and create root@pam's tokens."""
    with cluster.ticket(ADMIN, ADMIN_PW) as admin:
        made = _data(admin.post("/access/users/root@pam/token/by-admin", data={"privsep": 1}))
        assert made["full-tokenid"] == "root@pam!by-admin"
        _data(admin.put("/access/users/root@pam", data={"enable": 0}))
        assert cluster.root.get("/nodes").status_code == 401  # root's own token dies with its user
        _data(admin.put("/access/users/root@pam", data={"enable": 1}))
        _data(admin.delete("/access/users/root@pam/token/by-admin"))
    assert cluster.root.get("/nodes").status_code == 200
