"""Fixtures: a fresh backend per test on SQLite and on PostgreSQL (a uniquely named database, dropped after)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hvsync_backend.app import create_app
from hvsync_backend.config import Settings
from hvsync_backend.context import BackendContext

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass
class Backend:
    app: FastAPI
    client: TestClient
    settings: Settings

    @property
    def context(self) -> BackendContext:
        return self.app.state.context


def _pg_database() -> Iterator[str]:
    name = f"hvsync_test_{secrets.token_hex(6)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """One uniquely named PostgreSQL database for the session (dropped at the end); tables emptied per test."""
    yield from _pg_database()


def _pg_empty(url: str) -> None:
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
            )
        ]
        if tables:
            conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'hvsync.db'}"
    else:
        url = request.getfixturevalue("pg_database_url")
        _pg_empty(url)
        yield url


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", database_url=database_url, bcrypt_rounds=4)


@pytest.fixture
def backend(settings: Settings) -> Iterator[Backend]:
    app = create_app(settings)
    with TestClient(app) as client:
        yield Backend(app=app, client=client, settings=settings)
    app.state.context.engine.dispose()


KEY = "k" * 8 + secrets.token_urlsafe(40)


@pytest.fixture
def auth(backend: Backend) -> dict[str, str]:
    """Register the bootstrap key and return the header that carries it."""
    r = backend.client.post("/auth/register-key", json={"api_key": KEY, "label": "bootstrap"})
    assert r.status_code == 201, r.text
    return {"X-Service-API-Key": KEY}
