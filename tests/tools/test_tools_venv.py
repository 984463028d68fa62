"""The tools' venv holds the pinned releases, and an emulator process answers over HTTPS."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import RunningEmulator


def test_tools_are_the_pinned_releases(tools_venv: Path, tool_env: dict[str, str]) -> None:
    out = subprocess.run(
        [
            str(tools_venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('prometheus-pve-exporter'), m.version('ansible'))",
        ],
        env=tool_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    pinned = {
        line.split("==")[0]: line.split("==")[1].split()[0]
        for line in Path(__file__).with_name("requirements.in").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    assert out == [pinned["prometheus-pve-exporter"], pinned["ansible"]]


def test_emulator_process_reports_its_release(emulator: RunningEmulator) -> None:
    version = emulator.get("/version")
    assert isinstance(version, dict)
    assert version["release"] == emulator.release
