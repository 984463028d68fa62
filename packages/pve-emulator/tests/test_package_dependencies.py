"""The package declares exactly what its code imports: nothing unused, nothing only present by luck."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
SOURCE = PACKAGE_ROOT / "src" / "pve_emulator"
# imported only when pytest loads the plugin entry point, i.e. when pytest is already there
PROVIDED_BY_HOST = {"pytest"}


def _declared() -> set[str]:
    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())["project"]
    return {
        re.split(r"[\[<>=!~; ]", dep, maxsplit=1)[0].lower().replace("-", "_")
        for dep in project["dependencies"]
    }


def _located(node: ast.AST) -> str | None:
    """The name in ``find_spec("name")``: a package found (for the files it ships), never imported."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    first = node.args[0]
    if called == "find_spec" and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def _imported() -> set[str]:
    names: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
            elif located := _located(node):  # used for its files only (fastapi-offline's docs assets)
                names.add(located.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "pve_emulator"}


def test_every_declared_dependency_is_imported() -> None:
    assert sorted(_declared() - _imported()) == []


def test_every_third_party_import_is_declared() -> None:
    assert sorted(_imported() - _declared() - PROVIDED_BY_HOST) == []
