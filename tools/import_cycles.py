#!/usr/bin/env python3
"""Import cycles among the modules of one package, found from the source (nothing is imported).

Every import counts: at module level, inside functions and classes, under `if TYPE_CHECKING:`, relative
or absolute, `import a.b` and `from a import b` (an edge to the module `a.b` when `b` is one). A cycle
dodged by moving an import into a function is still a cycle, so it is still reported.

    python tools/import_cycles.py <src dir> <package>     # prints each cycle; exit 1 when there is one

The package tests call `find_cycles` (packages/*/tests/test_import_cycles.py).
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

__all__ = ["Edge", "find_cycles", "import_graph", "render"]


@dataclass(frozen=True, slots=True)
class Edge:
    """`source` imports `target` at `path:line`."""

    source: str
    target: str
    path: str
    line: int


def _modules(src: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for every `.py` file of the package (symlinked folders included)."""
    out: dict[str, Path] = {}
    files = [Path(d) / f for d, _, names in os.walk(src / package, followlinks=True) for f in names]
    for path in sorted(f for f in files if f.suffix == ".py"):
        rel = path.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is a module of the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                prefix = ".".join([*base, node.module] if node.module else base)
            else:
                prefix = node.module or ""
            for alias in node.names:
                full = f"{prefix}.{alias.name}"
                yield (full if full in modules else prefix), node.lineno


def import_graph(src: Path, package: str) -> list[Edge]:
    """Every import edge between two modules of `package` under `src`."""
    modules = _modules(src, package)
    edges: set[Edge] = set()
    for module, path in modules.items():
        for name, line in _imports(module, path, modules):
            target = _resolve(name, modules)
            if target is not None and target != module:
                edges.add(Edge(module, target, str(path.relative_to(src)), line))
    return sorted(edges, key=lambda e: (e.source, e.target, e.line))


def _strongly_connected(nodes: set[str], succ: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module only."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(succ.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _chain(component: list[str], succ: dict[str, set[str]]) -> list[str]:
    """One closed path through a component, starting at its first module: a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    # breadth-first back to the start, inside the component
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for child in sorted(succ.get(node, ())):
                if child not in members:
                    continue
                if child == start:
                    path = [start]
                    while node != start:
                        path.append(node)
                        node = previous[node]
                    return [start, *reversed(path[1:]), start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    return [start, start]


def find_cycles(src: Path, package: str) -> list[list[Edge]]:
    """Each import cycle of the package as the edges of one closed chain (empty when there is none)."""
    edges = import_graph(src, package)
    succ: dict[str, set[str]] = {}
    first: dict[tuple[str, str], Edge] = {}
    for edge in edges:
        succ.setdefault(edge.source, set()).add(edge.target)
        first.setdefault((edge.source, edge.target), edge)
    nodes = {e.source for e in edges} | {e.target for e in edges}
    cycles = []
    for component in _strongly_connected(nodes, succ):
        chain = _chain(component, succ)
        cycles.append([first[(a, b)] for a, b in pairwise(chain)])
    return cycles


def render(cycle: list[Edge]) -> str:
    """`a -> b -> a` with where each import is written."""
    names = " -> ".join([cycle[0].source, *(e.target for e in cycle)])
    where = "; ".join(f"{e.source} imports {e.target} at {e.path}:{e.line}" for e in cycle)
    return f"{names}\n    ({where})"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    cycles = find_cycles(Path(argv[0]), argv[1])
    for cycle in cycles:
        print(render(cycle))
    print(f"{len(cycles)} import cycle(s) in {argv[1]}")
    return 1 if cycles else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
