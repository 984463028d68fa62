#!/usr/bin/env python3
"""Compile Proxmox VE's published ``apidoc.js`` into the emulator's compact, facts-only schema.

The source file is the API viewer's data (``const apiSchema = [...]``). We keep only facts a program
needs to serve and validate the API: paths, methods, operation names, parameters with their types and
constraints, return types and permission flags. Every descriptive text is dropped, so no prose from
the source ends up in the project.

Usage::

    tools/compile_pve_schema.py [--source apidoc.js] [--output schema.json] [--release 9.1]

With no arguments it compiles every capture in ``RELEASES`` into the emulator package.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIR = ROOT.parent / "shared" / "pve-schema"
SCHEMA_DIR = ROOT / "packages" / "pve-emulator" / "src" / "pve_emulator" / "schema"

# API release -> (source capture, compiled file). The first entry is the default release.
RELEASES: dict[str, tuple[str, str]] = {
    "9.1": ("apidoc-2026-01-04.js", "pve-9.1.json"),
    "8.4": ("apidoc-2025-06-10.js", "pve-8.4.json"),
}
DEFAULT_RELEASE = "9.1"

# Keys of a JSON-schema-like node that carry facts; everything else (description, typetext, title,
# verbose_description, format_description, renderer, ...) is presentation text and is dropped.
FACT_KEYS = frozenset(
    {
        "type",
        "optional",
        "format",
        "enum",
        "default",
        "pattern",
        "minimum",
        "maximum",
        "maxLength",
        "minLength",
        "items",
        "properties",
        "additionalProperties",
        "requires",
        "alias",
        "keyAlias",
        "default_key",
        "type-property",
        "instance-types",
        "oneOf",
        "links",
    }
)
OPERATION_KEYS = ("allowtoken", "protected", "proxyto", "expose_credentials", "download_allowed")
METHOD_ORDER = {"GET": 0, "POST": 1, "PUT": 2, "DELETE": 3}


def load_apidoc(source: Path) -> list[dict[str, Any]]:
    """Parse the JSON value assigned to ``apiSchema`` in an ``apidoc.js`` file."""
    text = source.read_text(encoding="utf-8")
    marker = "apiSchema = "
    start = text.find(marker)
    if start < 0:
        raise ValueError(f"{source}: no 'apiSchema = ' assignment found")
    tree, _ = json.JSONDecoder().raw_decode(text, start + len(marker))
    if not isinstance(tree, list):
        raise ValueError(f"{source}: apiSchema is not a list")
    return tree


def facts(node: Any) -> Any:
    """Return a copy of a schema node with only its factual keys, recursively."""
    if isinstance(node, list):
        return [facts(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in FACT_KEYS:
            continue
        if key in ("properties", "format") and isinstance(value, dict):
            # Property maps: every key is a name, every value is a schema node.
            out[key] = {name: facts(sub) for name, sub in value.items()}
        elif key == "links" and isinstance(value, list):
            out[key] = [{k: v for k, v in link.items() if k in ("href", "rel")} for link in value]
        else:
            out[key] = facts(value)
    return typed(out)


def _number(value: str) -> int | float | None:
    """The number a string spells (an int when it is whole), or None."""
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() else number


def typed(node: dict[str, Any]) -> dict[str, Any]:
    """Write the numbers and flags the source gives as strings as JSON numbers.

    ``apidoc.js`` is dumped from Perl, which does not keep a scalar's type, so a few constraints come out
    as strings: ``"minimum": "0"`` on every ``bwlimit`` rate, ``"optional": "1"``, an integer ``enum`` of
    ``"1", "2", ...``. Compared as they are, ``"0"`` against a number raises TypeError in Python, and they
    are not valid JSON Schema. ``"enum": null`` (an empty list in the source) constrains nothing and is
    dropped. Other strings (a ``default`` such as ``"same as user"``) stay: they are what Proxmox wrote.
    """
    kind = node.get("type")
    for key in ("minimum", "maximum", "minLength", "maxLength", "optional"):
        if isinstance(node.get(key), str):
            number = _number(node[key])
            if number is None:
                del node[key]  # not a number: no bound Python or JSON Schema could apply
            else:
                node[key] = number
    if kind in ("integer", "number", "boolean") and isinstance(node.get("default"), str):
        number = _number(node["default"])
        if number is not None:
            node["default"] = number
    if "enum" in node and node["enum"] is None:
        del node["enum"]
    elif kind in ("integer", "number") and isinstance(node.get("enum"), list):
        node["enum"] = [
            n if isinstance(v, str) and (n := _number(v)) is not None else v for v in node["enum"]
        ]
    return node


def permissions(info: dict[str, Any]) -> dict[str, Any] | None:
    perms = info.get("permissions")
    if not isinstance(perms, dict):
        return None
    kept = {k: v for k, v in perms.items() if k in ("check", "user")}
    return kept or None


def compile_tree(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flatten the apidoc tree into a sorted list of operations."""
    operations: list[dict[str, Any]] = []
    stack = list(tree)
    while stack:
        node = stack.pop()
        stack.extend(node.get("children") or [])
        for method, info in (node.get("info") or {}).items():
            params = info.get("parameters") or {}
            op: dict[str, Any] = {
                "path": node["path"],
                "method": method.upper(),
                "name": info.get("name"),
                "params": {name: facts(spec) for name, spec in (params.get("properties") or {}).items()},
                "returns": facts(info.get("returns") or {}),
            }
            if params.get("additionalProperties"):
                op["additionalParams"] = 1
            perms = permissions(info)
            if perms is not None:
                op["permissions"] = perms
            for key in OPERATION_KEYS:
                if key in info:
                    op[key] = info[key]
            operations.append(op)
    operations.sort(key=lambda op: (op["path"], METHOD_ORDER.get(op["method"], 9)))
    return operations


def compile_schema(source: Path, release: str) -> dict[str, Any]:
    operations = compile_tree(load_apidoc(source))
    counts = Counter(op["method"] for op in operations)
    return {
        "release": release,
        "source": source.name,
        "counts": {m: counts[m] for m in sorted(counts, key=lambda m: METHOD_ORDER.get(m, 9))},
        "operations": operations,
    }


def render(schema: dict[str, Any]) -> str:
    """Serialise deterministically: one operation per line keeps diffs readable and the file compact."""
    head = {k: v for k, v in schema.items() if k != "operations"}
    lines = [json.dumps(op, sort_keys=True, separators=(",", ":")) for op in schema["operations"]]
    body = ",\n".join(lines)
    head_text = json.dumps(head, sort_keys=True, separators=(",", ":"))[:-1]
    return f'{head_text},"operations":[\n{body}\n]}}\n'


def default_paths(release: str) -> tuple[Path, Path]:
    capture, compiled = RELEASES[release]
    return SOURCE_DIR / capture, SCHEMA_DIR / compiled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--release", help="API release label stored in the schema (default: every release in RELEASES)"
    )
    parser.add_argument("--source", type=Path, help="apidoc.js to read (default: the release's capture)")
    parser.add_argument("--output", type=Path, help="compiled JSON to write (default: in the package)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the output file is not current")
    args = parser.parse_args(argv)
    if args.release is None:
        if args.source is not None or args.output is not None:
            args.release = DEFAULT_RELEASE
        else:  # no arguments: compile (or check) every known release
            flags = ["--check"] if args.check else []
            return max(main(["--release", release, *flags]) for release in RELEASES)
    if args.release not in RELEASES and (args.source is None or args.output is None):
        parser.error(f"unknown release {args.release!r}: give --source and --output")
    source, output = default_paths(args.release) if args.release in RELEASES else (args.source, args.output)
    source = args.source or source
    output = args.output or output
    if not source.is_file():
        print(f"source data not found: {source}", file=sys.stderr)
        return 2
    text = render(compile_schema(source, args.release))
    if args.check:
        current = output.read_text(encoding="utf-8") if output.is_file() else ""
        if current != text:
            print(f"{output} is out of date; run tools/compile_pve_schema.py", file=sys.stderr)
            return 1
        print(f"{output} is current")
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    schema = json.loads(text)
    print(f"wrote {output}: {len(schema['operations'])} operations {schema['counts']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
