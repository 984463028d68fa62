"""The operator CLI: local key management (the recovery path), status, encryption-key rotation."""

from __future__ import annotations

import json
import stat

import pytest
from fastapi.testclient import TestClient
from hvsync_backend.app import create_app
from hvsync_backend.cli import main
from hvsync_backend.config import Settings
from hvsync_backend.endpoints.service import get_hv_targets


@pytest.fixture
def env(settings, monkeypatch) -> Settings:
    monkeypatch.setenv("HVSYNC_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("HVSYNC_DATABASE_URL", settings.resolved_database_url)
    monkeypatch.setenv("HVSYNC_BCRYPT_ROUNDS", "4")
    return settings


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def test_keys_create_list_deactivate_delete(env, capsys) -> None:
    code, out = run(capsys, "keys", "--json", "create", "--label", "ops")
    created = json.loads(out)
    assert code == 0 and created["label"] == "ops" and created["raw_key"].startswith(f"hvsk_{created['id']}_")
    code, out = run(capsys, "keys", "--json", "list")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [created["id"]]
    assert created["raw_key"] not in out
    assert main(["keys", "deactivate", str(created["id"])]) == 1  # last active key
    assert main(["keys", "deactivate", str(created["id"]), "--force"]) == 0
    capsys.readouterr()
    code, out = run(capsys, "keys", "--json", "list")
    assert json.loads(out)["is_active"] is False
    assert main(["keys", "delete", "999"]) == 1
    assert main(["keys", "delete", str(created["id"]), "--force"]) == 0


def test_recovery_when_no_active_key(env, capsys) -> None:
    app = create_app(env)
    client = TestClient(app)
    assert client.post("/auth/register-key", json={"api_key": "r" * 40}).status_code == 201
    assert main(["keys", "deactivate", "1", "--force"]) == 0
    assert client.get("/auth/keys", headers={"X-Service-API-Key": "r" * 40}).status_code == 401
    assert client.post("/auth/register-key", json={"api_key": "n" * 40}).status_code == 409
    capsys.readouterr()
    code, out = run(capsys, "keys", "--json", "create", "--label", "recovery")
    assert code == 0
    raw = json.loads(out)["raw_key"]
    r = client.get("/auth/keys", headers={"X-Service-API-Key": raw})
    assert r.status_code == 200 and [k["label"] for k in r.json()["keys"]] == ["", "recovery"]
    app.state.context.engine.dispose()


def test_status(env, capsys) -> None:
    code, out = run(capsys, "status", "--json")
    status = json.loads(out)
    assert code == 0 and status["needs_bootstrap"] is True and status["keys_total"] == 0
    assert status["schema_revision"] == status["schema_head"] == "0004"
    assert status["database"] in ("sqlite", "postgresql")


def test_rotate_encryption_key_keeps_credentials_readable(env, capsys) -> None:
    app = create_app(env)
    ctx = app.state.context
    ctx.keys.register_bootstrap("x" * 40, "")
    client = TestClient(app)
    r = client.post(
        "/hv/endpoints",
        headers={"X-Service-API-Key": "x" * 40},
        json={
            "name": "a",
            "ip_address": "192.0.2.1",
            "port": 8006,
            "username": "root@pam",
            "password": "pw-rot-1",
        },
    )
    assert r.status_code == 201
    key_file = env.resolved_key_file
    old_key = key_file.read_text()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    code, out = run(capsys, "rotate-encryption-key")
    assert code == 0 and "re-encrypted 1 credential" in out
    assert key_file.read_text() != old_key and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    ctx.engine.dispose()
    fresh = create_app(env).state.context
    assert [t.password for t in get_hv_targets(fresh.registry)] == ["pw-rot-1"]
    fresh.engine.dispose()


def test_key_file_created_0600_once(tmp_path) -> None:
    from hvsync_backend.endpoints.crypto import load_or_create_key_file

    path = tmp_path / "d" / "fernet.key"
    first = load_or_create_key_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key_file(path) == first


def test_key_file_is_never_visible_empty_while_it_is_made(tmp_path, monkeypatch) -> None:
    """A second worker starting at the same moment read the file between create and write, empty."""
    import os

    from hvsync_backend.endpoints import crypto

    path = tmp_path / "fernet.key"
    seen: list[bool] = []
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        seen.append(path.exists())  # what a second process would find at this moment
        return real_write(fd, data)

    monkeypatch.setattr(crypto.os, "write", write)
    keys = crypto.load_or_create_key_file(path)
    assert seen == [False] and len(keys) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fernet.key"]  # no draft left behind


def test_a_key_file_made_by_another_process_first_wins(tmp_path, monkeypatch) -> None:
    from hvsync_backend.endpoints import crypto

    path = tmp_path / "fernet.key"
    theirs = crypto.Fernet.generate_key()
    real_link = crypto.os.link

    def link(src: str, dst: str) -> None:
        path.write_bytes(theirs + b"\n")  # the other process linked its key first
        real_link(src, dst)

    monkeypatch.setattr(crypto.os, "link", link)
    assert crypto.load_or_create_key_file(path) == [theirs]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fernet.key"]
