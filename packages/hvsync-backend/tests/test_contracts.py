"""contracts/backend-*.schema.json are current, and real responses validate against them."""

from __future__ import annotations

from pathlib import Path

import jsonschema
from hvsync_backend.contracts import generate, render

CONTRACTS = Path(__file__).resolve().parents[3] / "contracts"


def test_contract_files_are_current() -> None:
    for filename, schema in generate().items():
        assert (CONTRACTS / filename).read_text(encoding="utf-8") == render(schema), (
            f"{filename} is stale: python -m hvsync_backend.contracts --write contracts"
        )


def _validator(filename: str, name: str) -> jsonschema.Draft202012Validator:
    schema = generate()[filename]
    return jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{name}"})


def test_responses_validate_against_contracts(backend, auth) -> None:
    c = backend.client
    _validator("backend-auth.schema.json", "BootstrapStatus").validate(c.get("/auth/bootstrap-status").json())
    _validator("backend-auth.schema.json", "KeyCreatedOut").validate(
        c.post("/auth/keys", headers=auth).json()
    )
    _validator("backend-auth.schema.json", "KeyListOut").validate(c.get("/auth/keys", headers=auth).json())
    bad = c.post("/hv/endpoints", headers=auth, json={"name": "", "port": 0, "password": "p"}).json()
    _validator("backend-auth.schema.json", "ValidationErrorBody").validate(bad)
    inv = c.post("/inventory/endpoint", headers=auth, json={"domain": "nb.example.com", "port": 443}).json()
    _validator("backend-endpoints.schema.json", "InventoryEndpointOut").validate(inv)
    hv = c.post(
        "/hv/endpoints",
        headers=auth,
        json={
            "name": "a (inv:1)",
            "ip_address": "127.0.0.1",
            "port": 9,
            "username": "root@pam",
            "password": "p",
            "timeout": 1,
            "max_retries": 0,
        },
    ).json()
    _validator("backend-endpoints.schema.json", "HvEndpointOut").validate(hv)
    failed = c.get("/hv/nodes/", headers=auth).json()
    _validator("backend-hv-reads.schema.json", "AllFailedOut").validate(failed)
