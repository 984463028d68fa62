"""SPEC 4.1 / 5.1.2: the exempt routes answer without a key, before and after bootstrap."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hvsync_backend import __version__
from hvsync_backend.app import create_app
from hvsync_backend.config import Settings

EXEMPT_GETS = ["/", "/docs", "/redoc", "/openapi.json", "/health", "/meta", "/auth/bootstrap-status"]


def test_exempt_routes_without_key_in_bootstrap_mode(backend) -> None:
    for path in EXEMPT_GETS:
        r = backend.client.get(path)
        assert r.status_code == 200, (path, r.text)
    assert "swagger" in backend.client.get("/docs").text.lower()
    assert "redoc" in backend.client.get("/redoc").text.lower()


def test_exempt_routes_without_key_after_bootstrap(backend, auth) -> None:
    for path in EXEMPT_GETS:
        assert backend.client.get(path).status_code == 200, path
    assert backend.client.get("/auth/bootstrap-status").json() == {
        "needs_bootstrap": False,
        "has_db_keys": True,
    }


def test_every_other_route_requires_the_key(backend, auth) -> None:
    schema = backend.client.get("/openapi.json").json()
    exempt = {("get", p) for p in EXEMPT_GETS} | {("post", "/auth/register-key")}
    checked = 0
    for path, ops in schema["paths"].items():
        for method in ops:
            if (method, path) in exempt:
                continue
            url = path.replace("{key_id}", "1").replace("{endpoint_id}", "1")
            r = backend.client.request(method.upper(), url, headers={"X-Service-API-Key": "x" * 40})
            assert r.status_code == 401, (method, path, r.text)
            assert r.json() == {"detail": "Invalid API key"}
            backend.context.lockout.record_success("testclient")
            checked += 1
    assert checked >= 12


def test_root_meta_and_health_bodies(backend) -> None:
    root = backend.client.get("/").json()
    assert root["service"] == "hvsync-backend" and root["version"] == __version__
    assert root["docs"] == "/docs" and root["health"] == "/health"
    meta = backend.client.get("/meta").json()
    kind = "sqlite" if backend.settings.resolved_database_url.startswith("sqlite") else "postgresql"
    assert meta == {"service": "hvsync-backend", "version": __version__, "api_version": "1", "database": kind}
    health = backend.client.get("/health").json()
    assert health["ready"] is True and health["status"] == "ok"
    assert health["checks"]["database"]["ok"] is True
    assert "0004" in health["checks"]["database"]["detail"]


def test_health_says_why_when_not_ready(tmp_path) -> None:
    settings = Settings(
        data_dir=tmp_path, database_url="postgresql+psycopg://postgres@127.0.0.1:1/nowhere", bcrypt_rounds=4
    )
    client = TestClient(create_app(settings))
    r = client.get("/health")
    assert r.status_code == 503
    body = r.json()
    assert body["ready"] is False and body["checks"]["database"]["ok"] is False
    assert "unreachable" in body["checks"]["database"]["detail"]
    # A protected call on a broken database is a clear 503, not a 500.
    r = client.get("/auth/keys", headers={"X-Service-API-Key": "x" * 40})
    assert r.status_code == 503 and r.json() == {"detail": "database unavailable"}


def test_bad_encryption_key_reported_by_health(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, encryption_key="not-a-fernet-key", bcrypt_rounds=4)
    client = TestClient(create_app(settings))
    body = client.get("/health").json()
    assert body["ready"] is False and body["checks"]["encryption_key"]["ok"] is False
    assert "not-a-fernet-key" not in client.get("/health").text


@pytest.mark.parametrize("env_name", ["HVSYNC_DATABASE_URL"])
def test_database_url_defaults_to_sqlite_in_data_dir(tmp_path, monkeypatch, env_name) -> None:
    monkeypatch.delenv(env_name, raising=False)
    monkeypatch.setenv("HVSYNC_DATA_DIR", str(tmp_path / "d"))
    s = Settings()
    assert s.resolved_database_url == f"sqlite:///{(tmp_path / 'd' / 'hvsync.db').resolve()}"


def test_config_file_and_env_precedence(tmp_path, monkeypatch) -> None:
    cfg = tmp_path / "hvsync.toml"
    cfg.write_text('[backend]\nport = 9001\nlockout_threshold = 7\ntrusted_proxies = ["10.0.0.0/8"]\n')
    monkeypatch.setenv("HVSYNC_CONFIG_FILE", str(cfg))
    monkeypatch.setenv("HVSYNC_LOCKOUT_THRESHOLD", "9")
    s = Settings()
    assert s.port == 9001 and s.lockout_threshold == 9 and s.trusted_proxies == ["10.0.0.0/8"]


def test_plain_postgresql_url_uses_psycopg3(tmp_path) -> None:
    s = Settings(data_dir=tmp_path, database_url="postgresql://u@db:5432/hvsync")
    assert s.resolved_database_url == "postgresql+psycopg://u@db:5432/hvsync"
    s = Settings(data_dir=tmp_path, database_url="postgres://u@db/hvsync")
    assert s.resolved_database_url == "postgresql+psycopg://u@db/hvsync"


def test_trusted_proxies_from_the_environment_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented form: not parsed as JSON first (pydantic-settings would refuse `127.0.0.1`)."""
    monkeypatch.setenv("HVSYNC_TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/8")
    assert Settings().trusted_proxies == ["127.0.0.1", "10.0.0.0/8"]
