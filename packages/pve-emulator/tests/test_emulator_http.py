"""HTTP behaviour: bare and real paths, bodies, auth (ticket, CSRF, token), 401/403, paging, docs."""

from __future__ import annotations

import httpx
from pve_emulator.testing import EmulatorHandle


def _login(pve: EmulatorHandle, user: str, password: str, form: bool = True) -> httpx.Client:
    client = httpx.Client(base_url=pve.api_url, timeout=10)
    body = {"username": user, "password": password}
    resp = client.post("/access/ticket", data=body) if form else client.post("/access/ticket", json=body)
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    assert data["username"] == user and data["ticket"].startswith(f"PVE:{user}:")
    assert client.cookies.get("PVEAuthCookie") == data["ticket"]
    client.headers["CSRFPreventionToken"] = data["CSRFPreventionToken"]
    return client


def test_version_is_public_at_both_paths(pve_emulator: EmulatorHandle) -> None:
    real = httpx.get(pve_emulator.api_url + "/version", timeout=10)
    bare = httpx.get(pve_emulator.url + "/version", timeout=10)
    assert real.json() == {"data": bare.json()}
    assert set(bare.json()) >= {"version", "release", "repoid"}


def test_missing_and_invalid_auth_is_401(pve: EmulatorHandle) -> None:
    resp = httpx.get(pve.api_url + "/nodes", timeout=10)
    assert resp.status_code == 401 and resp.json()["data"] is None
    resp = httpx.get(pve.url + "/nodes", timeout=10)
    assert resp.status_code == 401 and resp.json()["detail"] and resp.json()["errors"] == []
    bad = {"Authorization": f"PVEAPIToken={pve.token_id}=00000000-0000-0000-0000-000000000000"}
    assert httpx.get(pve.api_url + "/nodes", headers=bad, timeout=10).status_code == 401
    resp = httpx.post(
        pve.api_url + "/access/ticket", data={"username": "root@pam", "password": "nope"}, timeout=10
    )
    assert resp.status_code == 401
    assert "nope" not in resp.text


def test_ticket_json_login_and_csrf(pve: EmulatorHandle) -> None:
    client = _login(pve, pve.user, pve.password, form=False)
    assert client.get("/nodes/pve1/qemu").status_code == 200
    csrf = client.headers.pop("CSRFPreventionToken")
    resp = client.post("/pools", data={"poolid": "csrf-test"})
    assert resp.status_code == 401 and "csrf" in resp.json()["message"]
    client.headers["CSRFPreventionToken"] = csrf
    assert client.post("/pools", data={"poolid": "csrf-test"}).status_code == 200
    assert client.delete("/pools/csrf-test").status_code == 200


def test_not_permitted_is_403(pve: EmulatorHandle, api: httpx.Client) -> None:
    assert (
        api.post("/access/users", data={"userid": "viewer@pve", "password": "viewer-pass-1"}).status_code
        == 200
    )
    assert (
        api.put(
            "/access/acl", data={"path": "/vms/100", "users": "viewer@pve", "roles": "PVEAuditor"}
        ).status_code
        == 200
    )
    viewer = _login(pve, "viewer@pve", "viewer-pass-1")
    listed = viewer.get("/nodes/pve1/qemu").json()["data"]
    assert [vm["vmid"] for vm in listed] == [100]  # lists show only what the user may audit
    assert viewer.get("/nodes/pve1/qemu/100/config").status_code == 200
    assert viewer.get("/nodes/pve2/qemu/101/config").status_code == 403
    resp = viewer.post("/nodes/pve1/qemu/100/status/stop")
    assert resp.status_code == 403
    assert api.get("/nodes/pve1/qemu/100/status/current").json()["data"]["status"] == "running"


def test_form_and_json_bodies_and_bare_shapes(
    pve: EmulatorHandle, api: httpx.Client, bare: httpx.Client
) -> None:
    resp = bare.post(
        "/nodes/pve3/qemu",
        json={
            "vmid": 901,
            "name": "bare-vm",
            "memory": 1024,
            "cores": 1,
            "sockets": 1,
            "ostype": "l26",
            "net0": "virtio,bridge=vmbr0",
            "scsi0": "local-lvm:8",
            "ide2": "none,media=cdrom",
        },
    )
    assert resp.status_code == 201
    assert (
        resp.json()["success"] is True
        and resp.json()["vmid"] == 901
        and resp.json()["task"].startswith("UPID:pve3:")
    )
    config = bare.get("/nodes/pve3/qemu/901/config").json()
    assert config["name"] == "bare-vm" and config["scsi0"] == "local-lvm:vm-901-disk-0,size=8G"
    assert config["vmid"] == 901 and config["bootdisk"] == "scsi0" and config["net0"].startswith("virtio=")
    assert "vmid" not in api.get("/nodes/pve3/qemu/901/config").json()["data"]  # real PVE has no vmid here
    resp = bare.post("/nodes/pve3/qemu/901/status/start")
    assert (
        resp.status_code == 200 and resp.json()["success"] is True and resp.json()["task"].startswith("UPID:")
    )
    # form body on the real path updates the config
    assert api.put("/nodes/pve3/qemu/901/config", data={"cores": "4", "delete": "ide2"}).status_code == 200
    config = api.get("/nodes/pve3/qemu/901/config").json()["data"]
    assert config["cores"] == 4 and "ide2" not in config


def test_validation_errors_name_the_field(bare: httpx.Client, api: httpx.Client) -> None:
    resp = bare.post("/nodes/pve1/qemu", json={"vmid": 5, "cores": "x"})
    assert resp.status_code == 400
    fields = {e["field"]: e["message"] for e in resp.json()["errors"]}
    assert set(fields) == {"vmid", "cores"}
    resp = api.get("/nodes/pve1/tasks", params={"limit": "-1"})
    assert resp.status_code == 400 and "limit" in resp.json()["errors"]
    resp = api.post("/nodes/pve1/qemu", content=b"{not json", headers={"content-type": "application/json"})
    assert resp.status_code == 400 and "body" in resp.json()["errors"]
    assert api.get("/nodes/nosuchnode/qemu").status_code == 404
    assert api.get("/nodes/pve1/qemu/99999/config").status_code == 404
    assert api.get("/no/such/path").status_code == 404


def test_pagination_and_filters(api: httpx.Client) -> None:
    everything = api.get("/cluster/resources").json()["data"]
    page = api.get("/cluster/resources", params={"start": 2, "limit": 3}).json()["data"]
    assert page == everything[2:5]
    vms = api.get("/cluster/resources", params={"type": "vm"}).json()["data"]
    assert vms and {r["type"] for r in vms} == {"qemu", "lxc"}
    tasks = api.get("/nodes/pve1/tasks", params={"limit": 2}).json()["data"]
    assert len(tasks) == 2
    only = api.get("/nodes/pve1/tasks", params={"typefilter": "vzdump"}).json()["data"]
    assert only and {t["type"] for t in only} == {"vzdump"}
    backups = api.get(
        "/nodes/pve1/storage/nfs-backup/content", params={"content": "backup", "vmid": 103}
    ).json()["data"]
    assert backups and all(b["vmid"] == 103 and b["content"] == "backup" for b in backups)
    assert all(b["volid"].startswith("nfs-backup:backup/vzdump-qemu-103-") for b in backups)


def test_cluster_resources_agree_with_node_lists(api: httpx.Client) -> None:
    resources = api.get("/cluster/resources", params={"type": "vm"}).json()["data"]
    per_node = []
    for node in ("pve1", "pve2", "pve3"):
        for kind in ("qemu", "lxc"):
            per_node += [
                (node, kind, vm["vmid"], vm["status"])
                for vm in api.get(f"/nodes/{node}/{kind}").json()["data"]
            ]
    assert sorted(per_node) == sorted((r["node"], r["type"], r["vmid"], r["status"]) for r in resources)


def test_openapi_describes_every_operation(pve: EmulatorHandle) -> None:
    doc = httpx.get(pve.url + "/openapi.json", timeout=10).json()
    ops = [(m, p) for p, item in doc["paths"].items() for m in item]
    assert (
        len(ops) == 646
        and len({o["operationId"] for item in doc["paths"].values() for o in item.values()}) == 646
    )
    assert "post" in doc["paths"]["/api2/json/nodes/{node}/qemu"]
    for page in ("/docs", "/redoc"):
        html = httpx.get(pve.url + page, timeout=10)
        assert html.status_code == 200 and "/openapi.json" in html.text


def test_cluster_storage_resources_agree_with_node_storage(api: httpx.Client) -> None:
    resources = api.get("/cluster/resources", params={"type": "storage"}).json()["data"]
    expected = []
    for node in ("pve1", "pve2", "pve3"):
        for st in api.get(f"/nodes/{node}/storage").json()["data"]:
            if not st["enabled"]:  # listed on every node, but a resource only where it is enabled
                continue
            expected.append((f"storage/{node}/{st['storage']}", node, st["storage"], st["total"], st["used"]))
    assert sorted(expected) == sorted(
        (r["id"], r["node"], r["storage"], r["maxdisk"], r["disk"]) for r in resources
    )


def test_planted_secrets_never_come_back(pve: EmulatorHandle, api: httpx.Client) -> None:
    secret = "planted-Secret-8c1f2e"
    assert api.post("/access/users", data={"userid": "secretive@pve", "password": secret}).status_code == 200
    bodies = [api.get("/access/users", params={"full": 1}).text, api.get("/access/users/secretive@pve").text]
    bad = httpx.post(
        pve.url + "/access/ticket", json={"username": "secretive@pve", "password": secret + "x"}, timeout=10
    )
    assert bad.status_code == 401
    bodies.append(bad.text)
    created = api.post(
        "/storage",
        data={
            "storage": "pbs1",
            "type": "pbs",
            "server": "10.0.0.9",
            "datastore": "main",
            "username": "backup@pbs",
            "password": secret,
            "fingerprint": "AB:" * 31 + "AB",
        },
    )
    assert created.status_code == 200, created.text
    bodies.append(created.text)
    bodies += [api.get("/storage").text, api.get("/storage/pbs1").text]
    token_header = {"Authorization": f"PVEAPIToken={pve.token_id}={secret}"}
    bodies.append(httpx.get(pve.api_url + "/nodes", headers=token_header, timeout=10).text)
    assert all(secret not in body for body in bodies)
    assert all(pve.token_secret not in body for body in bodies)
