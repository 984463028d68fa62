"""No import cycle among the plugin's modules (rules, backend, sync, views, NetBox glue), not even one
dodged by an import inside a function."""

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
tool = runpy.run_path(str(REPO / "tools" / "import_cycles.py"))


def test_plugin_has_no_import_cycle() -> None:
    cycles = tool["find_cycles"](REPO / "packages" / "netbox-hvsync" / "src", "netbox_hvsync")
    assert not cycles, "\n".join(map(tool["render"], cycles))
