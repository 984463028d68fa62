"""proxmoxer (from the tools' venv) logs in to emulators of both releases with a password and a token.

The password session exercises the ticket, the CSRF token on a write and proxmoxer's own renewal (it posts
its ticket as the password once the ticket is an hour old: forced here by ageing its birth time). The
token session reads ``/version``; a wrong password and a wrong token secret are refused with 401.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import RunningEmulator

SCRIPT = r"""
import json, sys, time
from proxmoxer import ProxmoxAPI
from proxmoxer.core import AuthenticationError, ResourceException

host, user, password, token_user, token_name, token_value, pool = sys.argv[1:]
out = {}

api = ProxmoxAPI(host, user=user, password=password, verify_ssl=False)
out["password_version"] = api.version.get()
out["password_nodes"] = sorted(n["node"] for n in api.nodes.get())
api.pools.post(poolid=pool, comment="made by proxmoxer")  # a write: proxmoxer sends the CSRF token
first_ticket, _ = api.get_tokens()
time.sleep(1.1)  # tickets carry whole seconds: let the renewed one get a later stamp
api._backend.auth.birth_time -= api._backend.auth.renew_age  # proxmoxer renews tickets older than this
out["renewed_version"] = api.version.get()
second_ticket, _ = api.get_tokens()
out["tickets"] = [first_ticket, second_ticket]

try:
    ProxmoxAPI(host, user=user, password=password + "-wrong", verify_ssl=False)
    out["wrong_password"] = "accepted"
except AuthenticationError as exc:
    out["wrong_password"] = str(exc)

token = ProxmoxAPI(host, user=token_user, token_name=token_name, token_value=token_value, verify_ssl=False)
out["token_version"] = token.version.get()
out["token_node_version"] = token.nodes(out["password_nodes"][0]).version.get()

bad = ProxmoxAPI(host, user=token_user, token_name=token_name, token_value="0" * 36, verify_ssl=False)
try:
    bad.nodes.get()
    out["wrong_token"] = "accepted"
except ResourceException as exc:
    out["wrong_token"] = exc.status_code

print(json.dumps(out))
"""


def _stamp(ticket: str) -> int:
    return int(ticket.split("::")[0].rsplit(":", 1)[1], 16)


@pytest.mark.parametrize("release", ["8.4", "9.1"])
def test_proxmoxer_password_and_token_login_report_the_release(
    release: str,
    tools_venv: Path,
    tool_env: dict[str, str],
    start_emulator: Callable[..., RunningEmulator],
) -> None:
    emulator = start_emulator(release=release)
    pool = f"proxmoxer-{release.replace('.', '')}"
    args = [emulator.address, emulator.user, emulator.password, emulator.token_user, emulator.token_name]
    run = subprocess.run(
        [str(tools_venv / "bin" / "python"), "-c", SCRIPT, *args, emulator.token_secret, pool],
        env=tool_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)

    served = emulator.get("/version")
    assert isinstance(served, dict) and served["release"] == release
    assert served["version"].startswith(release + ".")
    for key in ("password_version", "renewed_version", "token_version"):
        assert out[key] == served, key
    assert out["token_node_version"] == {k: served[k] for k in ("version", "release", "repoid")}
    nodes = emulator.get("/nodes")
    assert isinstance(nodes, list) and out["password_nodes"] == sorted(n["node"] for n in nodes)

    pools = emulator.get("/pools", poolid=pool)
    assert isinstance(pools, list) and [p["comment"] for p in pools] == ["made by proxmoxer"]

    first, second = out["tickets"]
    assert first.startswith(f"PVE:{emulator.user}:") and second.startswith(f"PVE:{emulator.user}:")
    assert _stamp(second) > _stamp(first)  # the renewal issued a new ticket

    assert "Couldn't authenticate user" in out["wrong_password"] and "code: 401" in out["wrong_password"]
    assert out["wrong_token"] == 401
