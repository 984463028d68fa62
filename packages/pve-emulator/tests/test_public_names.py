"""Every module of the emulator imports on its own, and every name its ``__all__`` promises is there
(httpx's habit, tools/public_names.py): a public name that moves or goes away leaves no stale promise."""

from __future__ import annotations

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
tool = runpy.run_path(str(REPO / "tools" / "public_names.py"))


def test_the_walk_reaches_every_layer() -> None:
    assert {
        "pve_emulator.errors",
        "pve_emulator.front",
        "pve_emulator.mock.guests",
        "pve_emulator.mock.guests.common",
        "pve_emulator.proxy.app",
        "pve_emulator.schema",
    } <= set(tool["module_names"]("pve_emulator"))


def test_every_name_in_all_exists_once() -> None:
    assert tool["missing_public_names"]("pve_emulator") == []
