"""Every module of hvsync_backend imports, and every name its `__all__` promises exists.

The alembic migration scripts are left out: they run inside alembic (`from alembic import op` binds to a
migration context), not as importable modules.
"""

from __future__ import annotations

import importlib
import pkgutil

import hvsync_backend

SKIPPED = ("hvsync_backend.db.migrations",)


def _modules() -> list[str]:
    found = pkgutil.walk_packages(hvsync_backend.__path__, prefix="hvsync_backend.")
    return sorted(["hvsync_backend", *(m.name for m in found if not m.name.startswith(SKIPPED))])


def test_every_module_imports_and_defines_every_name_of_its_all() -> None:
    modules = _modules()
    assert len(modules) > 60, modules  # the walk found the modules, not just the packages
    missing = []
    for name in modules:
        module = importlib.import_module(name)
        for public in getattr(module, "__all__", ()):
            if not hasattr(module, public):
                missing.append(f"{name}.{public}")
    assert missing == []
