"""The rules must import without Django or NetBox (docs/plugin-rules.md: nothing in rules/ may import Django or NetBox)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import netbox_hvsync.rules

CORE_DIR = Path(netbox_hvsync.rules.__file__).parent


def test_every_core_module_imports_without_django() -> None:
    modules = sorted(p.stem for p in CORE_DIR.glob("*.py") if p.stem != "__init__")
    assert len(modules) >= 15, modules
    code = (
        "import importlib, sys\n"
        "import netbox_hvsync\n"
        "before = set(sys.modules)\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module('netbox_hvsync.rules.' + name)\n"
        "roots = ('django', 'netbox', 'requests', 'rest_framework')\n"
        "added = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in roots)\n"
        "assert not added, added\n"
        "if 'django' not in before:  # the workspace venv: no NetBox, so nothing Django may be loaded at all\n"
        "    assert 'django' not in sys.modules\n"
        "print('clean' if 'django' not in sys.modules else 'netbox-venv')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    netbox_here = importlib.util.find_spec("netbox") is not None
    assert result.stdout.strip() == ("netbox-venv" if netbox_here else "clean")


def test_no_core_source_mentions_django_imports() -> None:
    for path in CORE_DIR.glob("*.py"):
        text = path.read_text()
        assert "import django" not in text and "from django" not in text, path
        assert "from netbox" not in text.replace("from netbox_hvsync", ""), path
