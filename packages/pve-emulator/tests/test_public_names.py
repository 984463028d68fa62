"""Every module of the emulator imports on its own, and every name its ``__all__`` promises is there
(httpx's habit): a public name that moves or goes away leaves no stale promise behind."""

from __future__ import annotations

import importlib
import pkgutil

import pve_emulator
import pytest

# ``__main__`` is the ``python -m pve_emulator`` entry: importing it runs the command line
MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(pve_emulator.__path__, "pve_emulator.")
    if not name.endswith(".__main__")
)


def test_the_walk_reaches_every_layer() -> None:
    assert {
        "pve_emulator.errors",
        "pve_emulator.front",
        "pve_emulator.mock.guests",
        "pve_emulator.mock.guests.common",
        "pve_emulator.proxy.app",
        "pve_emulator.schema",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_name_in_all_exists(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(getattr(module, "__all__", ()))
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"
    assert [n for n in exported if not hasattr(module, n)] == []
