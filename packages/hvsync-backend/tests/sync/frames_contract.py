"""Validation of stream frames against contracts/sse-frames.schema.json (shared by the sync tests)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = Path(__file__).resolve().parents[4] / "contracts" / "sse-frames.schema.json"


@cache
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


def assert_valid_frame(frame: dict[str, Any]) -> None:
    errors = sorted(validator().iter_errors(frame), key=lambda e: list(e.path))
    assert not errors, f"frame violates the contract: {[e.message for e in errors]} in {frame}"
