"""Every GET operation of the schema, called with valid parameters, answers without a server error
and, when it answers 200, with data matching the declared return type: checked with the same return
checker real mode runs on upstream answers, so real mode in front of the mock reports no drift."""

from __future__ import annotations

import re
from typing import Any

import httpx
from pve_emulator.returns import check_response
from pve_emulator.schema import load_schema
from pve_emulator.testing import EmulatorHandle
from pve_refusals import is_lifecycle_refusal

PATH_VALUES = {
    "node": "pve1",
    "vmid": "100",
    "storage": "local",
    "userid": "root@pam",
    "poolid": "production",
    "zone": "vlanzone",
    "vnet": "vnet100",
    "subnet": "vlanzone-10.100.0.0-24",
    "iface": "vmbr0",
    "id": "backup-nightly",
    "snapname": "before-upgrade",
    "volume": "local:iso/debian-13.1.0-amd64-netinst.iso",
    "tokenid": "hvsync",
}


def _value(name: str, spec: dict[str, Any]) -> str:
    if "default" in spec:
        return str(spec["default"])
    if spec.get("enum"):
        return str(spec["enum"][0])
    return {"integer": "1", "number": "1", "boolean": "0"}.get(
        spec.get("type", "string"), PATH_VALUES.get(name, "x")
    )


def _refusal(operation: str, resp: httpx.Response) -> bool:
    """A Proxmox refusal (its 500 and text, e.g. converting a guest with snapshots), not a crash."""
    try:
        message = resp.json().get("message")
    except ValueError:
        return False
    return is_lifecycle_refusal(operation, resp.status_code, message)


def test_every_get_operation_answers_without_5xx(pve_emulator: EmulatorHandle) -> None:
    schema = load_schema()
    headers = {"Authorization": f"PVEAPIToken={pve_emulator.token_id}={pve_emulator.token_secret}"}
    failures: list[str] = []
    shape_problems: list[str] = []
    checked: set[str] = set()
    gets = [op for op in schema.operations if op.method == "GET"]
    upid = None
    with httpx.Client(base_url=pve_emulator.api_url, headers=headers, timeout=10) as client:
        upid = client.get("/nodes/pve1/tasks").json()["data"][0]["upid"]
        for op in gets:
            values = {**PATH_VALUES, "upid": upid}
            if "/lxc/" in op.path:
                values["vmid"], values["snapname"] = "200", "clean-install"
            if op.path.startswith("/cluster/replication/"):
                values["id"] = "103-0"
            path = re.sub(r"\{([^}]+)\}", lambda m, v=values: v.get(m.group(1), "x"), op.path)
            query = {
                n: _value(n, s)
                for n, s in op.params.items()
                if n not in op.path_params and not s.get("optional") and not n.endswith("[n]")
            }
            resp = client.get(path, params=query)
            if resp.status_code >= 500 and not _refusal(op.key, resp):
                failures.append(f"{op.path} -> {resp.status_code} {resp.text[:120]}")
            elif resp.status_code == 200:
                checked.add(op.key)
                body = resp.json()
                assert "data" in body, op.path
                shape_problems += [f"{op.path}: {d}" for d in check_response(op, body["data"], limit=100)]
    assert not failures, "\n".join(failures)
    assert not shape_problems, "\n".join(shape_problems)
    ok = len(checked)
    assert ok >= 0.75 * len(gets), f"only {ok} of {len(gets)} GET operations answered 200"
    # objects the schema closes (additionalProperties 0) are among those checked
    assert {"GET /access/users/{userid}", "GET /access/users", "GET /nodes/{node}/qemu"} <= checked


def test_user_read_keeps_to_its_closed_schema_and_the_list_keeps_realm_type(api: httpx.Client) -> None:
    """``realm-type`` is declared for the user list only; the single-user object does not allow it."""
    user = api.get("/access/users/root@pam").json()["data"]
    declared = set(load_schema().by_key["GET /access/users/{userid}"].returns["properties"])
    assert set(user) <= declared and "realm-type" not in user
    assert (
        isinstance(user["groups"], list) and isinstance(user["tokens"], dict) and "hvsync" in user["tokens"]
    )
    listed = {u["userid"]: u for u in api.get("/access/users").json()["data"]}
    assert listed["root@pam"]["realm-type"] == "pam"


def test_every_changing_operation_answers_without_5xx() -> None:
    """POST/PUT/DELETE of every operation with its required parameters, on a private emulator: a clear
    4xx or a success, never a server error. (Deleting the caller's own token is left out: it works,
    and then every later call is rightly 401.)"""
    from pve_emulator.testing import running_emulator

    schema = load_schema()
    failures: list[str] = []
    denied: list[str] = []
    with running_emulator(task_duration=0) as pve:
        headers = {"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"}
        with httpx.Client(base_url=pve.api_url, headers=headers, timeout=10) as client:
            upid = client.get("/nodes/pve1/tasks").json()["data"][0]["upid"]
            for method in ("POST", "PUT", "DELETE"):
                for op in schema.operations:
                    if op.method != method or op.path == "/access/users/{userid}/token/{tokenid}":
                        continue
                    values = {**PATH_VALUES, "upid": upid}
                    if "/lxc/" in op.path:
                        values["vmid"], values["snapname"] = "200", "clean-install"
                    path = re.sub(r"\{([^}]+)\}", lambda m, v=values: v.get(m.group(1), "x"), op.path)
                    args = {
                        n: _value(n, s)
                        for n, s in op.params.items()
                        if n not in op.path_params and not s.get("optional") and not n.endswith("[n]")
                    }
                    if method == "DELETE":
                        resp = client.request(method, path, params=args)
                    else:
                        resp = client.request(method, path, data=args)
                    if resp.status_code >= 500 and not _refusal(op.key, resp):
                        failures.append(f"{method} {op.path} -> {resp.status_code} {resp.text[:120]}")
                    elif resp.status_code in (401, 403):
                        denied.append(f"{method} {op.path}")
            assert client.get("/version").status_code == 200
    assert not failures, "\n".join(failures)
    # only the login itself (wrong password) and operations Proxmox closes to API tokens refuse us
    assert set(denied) == {
        "POST /access/ticket",
        "POST /access/tfa/{userid}",
        "PUT /access/password",
        "PUT /access/tfa/{userid}/{id}",
        "DELETE /access/tfa/{userid}/{id}",
    }
