"""Every module of hvsync_backend imports, and every name its `__all__` promises exists (tools/public_names.py).

The alembic migration scripts are left out: they run inside alembic (`from alembic import op` binds to a
migration context), not as importable modules.
"""

from __future__ import annotations

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
tool = runpy.run_path(str(REPO / "tools" / "public_names.py"))
SKIPPED = ("hvsync_backend.db.migrations",)


def test_every_module_imports_and_defines_every_name_of_its_all() -> None:
    modules = tool["module_names"]("hvsync_backend", SKIPPED)
    assert len(modules) > 60, modules  # the walk found the modules, not just the packages
    assert tool["missing_public_names"]("hvsync_backend", SKIPPED) == []
