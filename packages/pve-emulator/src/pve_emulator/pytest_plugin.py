"""pytest fixtures (entry point ``pytest11``): ``pve_emulator`` and ``pve_emulator_factory``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from pve_emulator.testing import EmulatorHandle, running_emulator


@pytest.fixture(scope="session")
def pve_emulator() -> Iterator[EmulatorHandle]:
    """One demo-scenario emulator over plain HTTP for the whole session."""
    with running_emulator() as handle:
        yield handle


@pytest.fixture
def pve_emulator_factory() -> Iterator[Callable[..., EmulatorHandle]]:
    """Start emulators with ``running_emulator`` keyword arguments; all are stopped at teardown."""
    with ExitStack() as stack:

        def start(**kwargs: Any) -> EmulatorHandle:
            return stack.enter_context(running_emulator(**kwargs))

        yield start
