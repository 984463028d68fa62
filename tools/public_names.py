#!/usr/bin/env python3
"""Names a package promises in `__all__` but does not have (httpx's habit, as a check of every module).

Imports every module of the package (pkgutil, subpackages included) and lists each `module.name` whose
`__all__` names something the module does not define. A package's tests call `missing_public_names`
(packages/*/tests/test_public_names.py); the plugin's run inside NetBox, where its Django modules import.

    python tools/public_names.py <package> [--skip PREFIX ...]     # prints each missing name; exit 1 if any
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Iterable, Sequence

__all__ = ["missing_public_names", "module_names"]


def module_names(package: str, skip: Iterable[str] = ()) -> list[str]:
    """Every module of `package` (itself included), without those under a skipped prefix and without
    `__main__` modules (importing one runs the program)."""
    skipped = tuple(skip)
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        if not info.name.startswith(skipped) and not info.name.endswith(".__main__"):
            names.append(info.name)
    return sorted(n for n in names if not n.startswith(skipped))


def missing_public_names(package: str, skip: Iterable[str] = ()) -> list[str]:
    """`module.name` for each name in a module's `__all__` that the module does not have (and each name
    an `__all__` lists twice)."""
    missing: list[str] = []
    for name in module_names(package, skip):
        module = importlib.import_module(name)
        exported = list(getattr(module, "__all__", ()))
        missing += [f"{name}.{public}" for public in exported if not hasattr(module, public)]
        missing += [
            f"{name}.__all__ repeats {public}" for public in set(exported) if exported.count(public) > 1
        ]
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package")
    parser.add_argument("--skip", action="append", default=[], help="module prefix not to import")
    ns = parser.parse_args(argv)
    missing = missing_public_names(ns.package, ns.skip)
    for name in missing:
        print(f"{name}: named in __all__, not defined" if " repeats " not in name else name)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
