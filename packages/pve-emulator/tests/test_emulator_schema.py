"""The compiled schema: current with the compiler, facts only, the documented operation counts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pve_emulator.schema import SCHEMA_DIR, load_schema
from schema_compiler import load_compiler

REPO = Path(__file__).resolve().parents[3]
SOURCE = REPO.parent / "shared" / "pve-schema" / "apidoc-2026-01-04.js"
COMPILED = SCHEMA_DIR / "pve-9.1.json"


def test_committed_schema_equals_compiler_output(tmp_path: Path) -> None:
    if not SOURCE.is_file():
        if os.environ.get("HVSYNC_REQUIRE_SOURCE_DATA") == "1":
            pytest.fail(f"source data required but missing: {SOURCE}")
        pytest.skip(f"source data not present at {SOURCE} (set HVSYNC_REQUIRE_SOURCE_DATA=1 to require it)")
    compiler = load_compiler()
    out = tmp_path / "schema.json"
    assert compiler.main(["--source", str(SOURCE), "--output", str(out)]) == 0
    assert out.read_text() == COMPILED.read_text(), "run `make schema` and commit the result"


def test_compiler_drops_prose_and_keeps_constraints(tmp_path: Path) -> None:
    compiler = load_compiler()
    src = tmp_path / "apidoc.js"
    tree = [
        {
            "path": "/x",
            "text": "x",
            "leaf": 1,
            "info": {
                "GET": {
                    "method": "GET",
                    "name": "demo",
                    "description": "SECRET PROSE",
                    "allowtoken": 1,
                    "permissions": {"description": "more prose", "user": "all"},
                    "parameters": {
                        "additionalProperties": 0,
                        "properties": {
                            "n": {
                                "type": "integer",
                                "minimum": 1,
                                "maximum": 9,
                                "optional": 1,
                                "description": "prose",
                                "typetext": "<int>",
                                "format": {
                                    "k": {"type": "string", "enum": ["a"], "format_description": "prose"}
                                },
                            }
                        },
                    },
                    "returns": {
                        "type": "object",
                        "description": "prose",
                        "properties": {"v": {"type": "string", "title": "t"}},
                    },
                }
            },
        }
    ]
    src.write_text("const apiSchema = " + json.dumps(tree) + ";\nlet rest = 1;")
    out = tmp_path / "out.json"
    assert compiler.main(["--release", "test", "--source", str(src), "--output", str(out)]) == 0
    text = out.read_text()
    assert "prose" not in text.lower() and "typetext" not in text and "title" not in text
    op = json.loads(text)["operations"][0]
    assert op["params"]["n"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 9,
        "optional": 1,
        "format": {"k": {"type": "string", "enum": ["a"]}},
    }
    assert op["permissions"] == {"user": "all"}
    assert op["returns"] == {"type": "object", "properties": {"v": {"type": "string"}}}


def test_default_schema_counts() -> None:
    schema = load_schema()
    counts: dict[str, int] = {}
    for op in schema.operations:
        counts[op.method] = counts.get(op.method, 0) + 1
    assert len(schema.operations) == 646
    assert counts == {"GET": 326, "POST": 167, "PUT": 79, "DELETE": 74}
    assert len({op.key for op in schema.operations}) == 646


def test_no_descriptive_text_in_compiled_file() -> None:
    raw = json.loads(COMPILED.read_text())

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in (
                    "description",
                    "typetext",
                    "verbose_description",
                    "format_description",
                    "title",
                    "text",
                ):
                    # allowed only as a parameter/property *name* (then its value is a schema dict)
                    assert isinstance(value, dict) and ("type" in value or "optional" in value), (
                        f"{where}.{key}"
                    )
                walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{where}[{i}]")

    walk(raw, "$")


def test_every_handler_names_a_schema_operation() -> None:
    # the mock backend imports every handler module (that import is what registers them), so this
    # test sees the full registry on its own, whatever ran before it
    from pve_emulator.mock import backend
    from pve_emulator.mock.registry import HANDLERS

    schema = load_schema()
    assert set(HANDLERS) <= set(schema.by_key)
    assert len(HANDLERS) > 100
    modules = {handler.__module__.rsplit(".", 1)[-1] for handler in HANDLERS.values()}
    assert modules == {
        "access",
        "agent",
        "cluster",
        "consoles",
        "firewall",
        "guests",
        "network",
        "replication_api",
        "rrd",
        "storage",
        "subscription",
    }
    assert backend.HANDLERS is HANDLERS  # the registry the backend dispatches through


def test_router_prefers_literals_and_accepts_slashes_in_trailing_volume() -> None:
    router = load_schema().router
    methods, values = router.match(["nodes", "pve1", "qemu"])  # type: ignore[misc]
    assert "GET" in methods and values == {"node": "pve1"}
    methods, values = router.match(["nodes", "pve1", "storage", "local", "content", "local:backup", "x.vma"])  # type: ignore[misc]
    assert values["volume"] == "local:backup/x.vma" and "DELETE" in methods
    assert router.match(["nodes", "pve1", "nonsense", "deeper"]) is None
