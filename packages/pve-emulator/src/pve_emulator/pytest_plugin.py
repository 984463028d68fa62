"""pytest fixtures (entry point ``pytest11``): ``pve_emulator``, ``pve_emulator_factory``, ``pve_fresh``.

``pve_emulator`` is one plain-HTTP emulator for the whole session (per xdist worker: each worker is
its own process), for tests that read or share state. ``pve_fresh`` is a new emulator for one test,
over TLS with a CA of its own (``pve_fresh.ca_file``: clients verify it), started with the faults of
the test's ``@pytest.mark.pve_faults(...)`` marker and the options of ``@pytest.mark.pve_emulator(...)``
(``running_emulator`` keywords). Every emulator binds a free port and keeps its files in a temporary
directory of its own, so parallel workers never meet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from pve_emulator.testing import EmulatorHandle, running_emulator

FAULTS_MARKER = "pve_faults"
OPTIONS_MARKER = "pve_emulator"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{FAULTS_MARKER}(**faults): faults the pve_fresh emulator starts with (node_offline=['pve2'], "
        "no_quorum=True, ticket_lifetime=30, latency={'/nodes/*/qemu/*/config': 2.0}, drop_rate=0.05, "
        "locked={'101': 'backup'}, task_error={'vzdump': 'message'}, storage_unavailable=['nfs'], "
        "time_scale=0.1, connect_delay=0.5, seed=7)",
    )
    config.addinivalue_line(
        "markers",
        f"{OPTIONS_MARKER}(**options): running_emulator keywords for pve_fresh (scenario, tls, ...)",
    )


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


def marker_kwargs(request: pytest.FixtureRequest, name: str) -> dict[str, Any]:
    """The keywords of every ``name`` marker on the test, the closest (the function's) winning."""
    out: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(name))):
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{name} takes keyword arguments only")
        out.update(marker.kwargs)
    return out


@pytest.fixture
def pve_fresh(request: pytest.FixtureRequest) -> Iterator[EmulatorHandle]:
    """A new demo emulator for this test: TLS with its own CA (``ca_file``), the marker's faults."""
    options = {"tls": True, **marker_kwargs(request, OPTIONS_MARKER)}
    options["faults"] = {**options.get("faults", {}), **marker_kwargs(request, FAULTS_MARKER)}
    with running_emulator(**options) as handle:
        yield handle
