"""The schema compiler (``tools/compile_pve_schema.py``, a script, not a package) loaded as a module, for
the tests that compile an API capture and compare the result with what the package ships."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[3]


def load_compiler() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "compile_pve_schema", REPO / "tools" / "compile_pve_schema.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
