"""No import cycle among the backend's modules, not even one dodged by an import inside a function."""

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
tool = runpy.run_path(str(REPO / "tools" / "import_cycles.py"))


def test_backend_has_no_import_cycle() -> None:
    cycles = tool["find_cycles"](REPO / "packages" / "hvsync-backend" / "src", "hvsync_backend")
    assert not cycles, "\n".join(map(tool["render"], cycles))
