"""Every name a plugin module promises in `__all__` exists; inside NetBox, where its Django modules import."""

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
tool = runpy.run_path(str(REPO / "tools" / "public_names.py"))


def test_every_plugin_module_defines_every_name_of_its_all() -> None:
    modules = tool["module_names"]("netbox_hvsync")
    assert "netbox_hvsync.models" in modules and "netbox_hvsync.api.views" in modules, modules
    assert tool["missing_public_names"]("netbox_hvsync") == []
