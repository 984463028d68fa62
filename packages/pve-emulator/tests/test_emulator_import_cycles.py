"""No import cycle among the emulator's modules; and the cycle finder (tools/import_cycles.py) itself
finds the cycles it promises to: through function-level, TYPE_CHECKING and relative imports."""

import runpy
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
tool = runpy.run_path(str(REPO / "tools" / "import_cycles.py"))


def test_emulator_has_no_import_cycle() -> None:
    cycles = tool["find_cycles"](REPO / "packages" / "pve-emulator" / "src", "pve_emulator")
    assert not cycles, "\n".join(map(tool["render"], cycles))


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in {"pkg/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "chain"),
    [
        (
            {"pkg/a.py": "from pkg import b\n", "pkg/b.py": "def f():\n    from pkg.a import x\n"},
            ["pkg.a", "pkg.b", "pkg.a"],
        ),
        (
            {
                "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
                "pkg/b.py": "import pkg.a\n",
            },
            ["pkg.a", "pkg.b", "pkg.a"],
        ),
        (
            {
                "pkg/sub/__init__.py": "",
                "pkg/sub/a.py": "from . import b\n",
                "pkg/sub/b.py": "from ..sub.a import y\n",
            },
            ["pkg.sub.a", "pkg.sub.b", "pkg.sub.a"],
        ),
        (
            {
                "pkg/a.py": "from pkg.b import f\n",
                "pkg/b.py": "from pkg.c import g\n",
                "pkg/c.py": "import pkg.a as a\n",
            },
            ["pkg.a", "pkg.b", "pkg.c", "pkg.a"],
        ),
    ],
    ids=["function-level", "type-checking", "relative", "three-modules"],
)
def test_cycles_are_found(tmp_path: Path, files: dict[str, str], chain: list[str]) -> None:
    [cycle] = tool["find_cycles"](write_package(tmp_path, files), "pkg")
    assert [cycle[0].source, *(edge.target for edge in cycle)] == chain
    assert all(edge.line >= 1 and edge.path.startswith("pkg/") for edge in cycle)


def test_an_acyclic_package_has_none(tmp_path: Path) -> None:
    files = {
        "pkg/a.py": "from pkg import b\nimport os\n",
        "pkg/b.py": "from pkg.c import g\n",
        "pkg/c.py": "x = 1\n",
    }
    src = write_package(tmp_path, files)
    assert tool["find_cycles"](src, "pkg") == []
    assert {(e.source, e.target) for e in tool["import_graph"](src, "pkg")} == {
        ("pkg.a", "pkg.b"),
        ("pkg.b", "pkg.c"),
    }
