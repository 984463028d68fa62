"""The plugin's migrations depend only on migrations that the oldest supported NetBox release ships.

A dependency on a newer core migration makes `migrate` fail on every older release (it did: 0001 depended
on 4.7.1's `dcim 0251_fix_ltree_cascade_triggers`). The matrix in `make test` migrates every release for
real; this test names the offending dependency without starting NetBox, from NetBox's released sources.
"""

from __future__ import annotations

import ast
import os
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
MIGRATIONS = REPO / "packages" / "netbox-hvsync" / "src" / "netbox_hvsync" / "migrations"
OLDEST = "4.5.8"
SOURCE = (
    Path(os.environ.get("HVSYNC_NETBOX_SRC", REPO.parent / "shared" / "netbox-src"))
    / f"netbox-{OLDEST}.tar.gz"
)
#: apps outside NetBox's tree (Django's own, and the swappable user model resolved by Django)
NOT_NETBOX = {"contenttypes", "auth", "taggit", "__setting__"}


def declared_dependencies() -> set[tuple[str, str]]:
    """(app, migration) pairs named in every plugin migration's `dependencies` list."""
    found: set[tuple[str, str]] = set()
    for path in sorted(MIGRATIONS.glob("[0-9]*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "dependencies" for t in node.targets
            ):
                for item in node.value.elts:  # type: ignore[attr-defined]
                    if isinstance(item, ast.Tuple):
                        app, name = (ast.literal_eval(e) for e in item.elts)
                        found.add((app, name))
    return found


def shipped_migrations(tarball: Path) -> set[tuple[str, str]]:
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    shipped = set()
    for name in names:
        parts = name.split("/")  # netbox-<v>/netbox/<app>/migrations/<name>.py
        if (
            len(parts) == 5
            and parts[3] == "migrations"
            and parts[4][:4].isdigit()
            and parts[4].endswith(".py")
        ):
            shipped.add((parts[2], parts[4][:-3]))
    return shipped


def test_every_core_dependency_exists_in_the_oldest_release() -> None:
    if not SOURCE.exists():
        if os.environ.get("HVSYNC_REQUIRE_SOURCE_DATA") == "1":
            pytest.fail(f"NetBox {OLDEST} source not present at {SOURCE}")
        pytest.skip(
            f"NetBox {OLDEST} source not present at {SOURCE} (set HVSYNC_REQUIRE_SOURCE_DATA=1 to require it)"
        )
    shipped = shipped_migrations(SOURCE)
    assert ("dcim", "0227_alter_interface_speed_bigint") in shipped  # the reader reads the tarball right
    core = {
        (app, name)
        for app, name in declared_dependencies()
        if app not in NOT_NETBOX and app != "netbox_hvsync"
    }
    assert core, "no core dependency found: the parser no longer reads the migrations"
    missing = sorted(core - shipped)
    assert not missing, f"plugin migrations depend on migrations NetBox {OLDEST} does not ship: {missing}"
