"""Planted secrets never appear in responses, logs or the database (SPEC 1.A.5, 2.3, DESIGN 7)."""

from __future__ import annotations

import logging
import secrets

import psycopg
from sqlalchemy.engine import make_url

PLANTED = {
    "token": "INVTOKEN" + secrets.token_hex(12),
    "token_key": "INVKEY" + secrets.token_hex(8),
    "password": "PVEPASS" + secrets.token_hex(12),
    "token_value": "PVETOKEN" + secrets.token_hex(12),
}


def _database_text(backend) -> bytes:
    url = backend.settings.resolved_database_url
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        backend.context.engine.dispose()
        chunks = []
        for suffix in ("", "-wal", "-shm"):
            try:
                with open(parsed.database + suffix, "rb") as fh:
                    chunks.append(fh.read())
            except FileNotFoundError:
                pass
        return b"".join(chunks)
    out = []
    with psycopg.connect(parsed.set(drivername="postgresql").render_as_string(hide_password=False)) as conn:
        for table in ("api_keys", "inventory_endpoints", "hv_endpoints"):
            for row in conn.execute(f"SELECT * FROM {table}"):
                out.append(repr(row))
    return "\n".join(out).encode()


def test_planted_secrets_absent_from_responses_logs_and_database(backend, auth, caplog, capfd) -> None:
    caplog.set_level(logging.DEBUG)
    c = backend.client
    bodies = []
    inv = c.post(
        "/inventory/endpoint",
        headers=auth,
        json={
            "domain": "nb.example.com",
            "port": 443,
            "token": PLANTED["token"],
            "token_key": PLANTED["token_key"],
        },
    )
    hv = c.post(
        "/hv/endpoints",
        headers=auth,
        json={
            "name": "x (inv:1)",
            "ip_address": "127.0.0.1",
            "port": 9,
            "username": "root@pam",
            "token_name": "t",
            "timeout": 1,
            "max_retries": 0,
            "access_methods": ["token", "password"],
            "password": PLANTED["password"],
            "token_value": PLANTED["token_value"],
        },
    )
    bodies += [inv.text, hv.text]
    bodies.append(
        c.put(f"/inventory/endpoint/{inv.json()['id']}", headers=auth, json={"token": PLANTED["token"]}).text
    )
    bodies.append(
        c.put(f"/hv/endpoints/{hv.json()['id']}", headers=auth, json={"password": PLANTED["password"]}).text
    )
    bodies += [c.get("/inventory/endpoint", headers=auth).text, c.get("/hv/endpoints", headers=auth).text]
    # Failing calls that carry or use the secrets: validation errors and an unreachable Proxmox.
    bodies.append(
        c.post(
            "/hv/endpoints", headers=auth, json={"name": "", "port": 1, "password": PLANTED["password"]}
        ).text
    )
    bodies.append(
        c.post(
            "/hv/endpoints",
            headers=auth,
            json={"name": "y", "port": "x", "token_value": [PLANTED["token_value"]]},
        ).text
    )
    bodies.append(
        c.put(
            f"/hv/endpoints/{hv.json()['id']}", headers=auth, json={"password": PLANTED["password"] + "\x01"}
        ).text
    )
    bodies.append(c.post("/auth/register-key", json={"api_key": PLANTED["password"][:20]}).text)
    bodies.append(c.get("/hv/nodes/", headers=auth).text)
    bodies.append(c.get("/hv/cluster/status", headers=auth).text)
    assert "unreachable" in bodies[-1]
    bodies.append(c.get("/openapi.json").text)

    captured = capfd.readouterr()
    logs = caplog.text + captured.out + captured.err
    database = _database_text(backend)
    assert b"nb.example.com" in database and b"x (inv:1)" in database  # the search reads real rows
    for name, value in PLANTED.items():
        for i, body in enumerate(bodies):
            assert value not in body, (name, i)
        assert value not in logs, name
        assert value.encode() not in database, name
        assert value[:20] not in "".join(bodies)
