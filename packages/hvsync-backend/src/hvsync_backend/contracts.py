"""Writes the backend's wire shapes as JSON Schema files under ``contracts/`` (``backend-*.schema.json``).

The files are generated from the pydantic models the routes use, so they cannot drift silently: a test
compares them with a fresh generation. Regenerate with ``python -m hvsync_backend.contracts --write contracts``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from hvsync_backend.api.hv import AllFailedOut, EndpointResultsOut
from hvsync_backend.api.keys import (
    BootstrapStatus,
    CreateKeyIn,
    DetailOut,
    KeyCreatedOut,
    KeyListOut,
    KeyOut,
    RegisterKeyIn,
)
from hvsync_backend.endpoints.schemas import (
    HvEndpointCreate,
    HvEndpointOut,
    HvEndpointUpdate,
    InventoryEndpointCreate,
    InventoryEndpointOut,
    InventoryEndpointUpdate,
)

VALIDATION_ERROR: dict[str, Any] = {
    "title": "ValidationErrorBody",
    "description": "422 body: each item names the offending field in `loc` (input values are never echoed).",
    "type": "object",
    "required": ["detail"],
    "properties": {
        "detail": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "loc", "msg"],
                "properties": {
                    "type": {"type": "string"},
                    "loc": {"type": "array", "items": {"type": ["string", "integer"]}},
                    "msg": {"type": "string"},
                    "ctx": {"type": "object"},
                },
                "additionalProperties": False,
            },
        }
    },
}

FILES: dict[str, tuple[str, list[type[BaseModel]], dict[str, Any]]] = {
    "backend-auth.schema.json": (
        "hvsync backend: bootstrap and API key bodies (SPEC 2.1, 2.2, 4.1, 4.2, 7.1)",
        [BootstrapStatus, RegisterKeyIn, CreateKeyIn, KeyOut, KeyCreatedOut, KeyListOut, DetailOut],
        {"ValidationErrorBody": VALIDATION_ERROR},
    ),
    "backend-endpoints.schema.json": (
        "hvsync backend: endpoint registry bodies (SPEC 2.3, 4.3); credentials are write-only",
        [
            InventoryEndpointCreate,
            InventoryEndpointUpdate,
            InventoryEndpointOut,
            HvEndpointCreate,
            HvEndpointUpdate,
            HvEndpointOut,
        ],
        {},
    ),
    "backend-hv-reads.schema.json": (
        "hvsync backend: GET /hv/cluster/status, /hv/nodes/, /hv/cluster/firewall, /hv/cluster/options, "
        "/hv/templates and /hv/guests/{vmid} answers (200 and 502)",
        [EndpointResultsOut, AllFailedOut],
        {},
    ),
}


def generate() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for filename, (title, models, extra) in FILES.items():
        modes: list[tuple[type[BaseModel], Literal["validation", "serialization"]]] = []
        for model in models:
            is_input = model.__name__.endswith(("Create", "Update", "In"))
            modes.append((model, "validation" if is_input else "serialization"))
        _, top = models_json_schema(modes, ref_template="#/$defs/{model}")
        defs = {**top.get("$defs", {}), **extra}
        out[filename] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://hvsync.invalid/contracts/{filename}",
            "title": title,
            "$defs": dict(sorted(defs.items())),
        }
    return out


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", type=Path, metavar="DIR", help="write the files into DIR")
    args = parser.parse_args()
    for filename, schema in generate().items():
        if args.write:
            (args.write / filename).write_text(render(schema), encoding="utf-8")
        else:
            print(filename)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
