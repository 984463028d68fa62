"""Every name the rules and the wire promise in `__all__` exists (tools/public_names.py imports each module)."""

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
tool = runpy.run_path(str(REPO / "tools" / "public_names.py"))


def test_rules_and_wire_define_every_name_of_their_all() -> None:
    modules = tool["module_names"]("netbox_hvsync.rules") + tool["module_names"]("netbox_hvsync.wire")
    assert len(modules) > 20, modules  # the walk found the modules, not just the packages
    missing = tool["missing_public_names"]("netbox_hvsync.rules") + tool["missing_public_names"](
        "netbox_hvsync.wire"
    )
    assert missing == []
