"""Shared fixtures: one TLS emulator for proxmoxer and helpers for authenticated httpx clients."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pve_emulator.testing import EmulatorHandle, running_emulator


@pytest.fixture(scope="session")
def pve_tls() -> Iterator[EmulatorHandle]:
    with running_emulator(tls=True) as handle:
        yield handle


def token_client(pve: EmulatorHandle, real: bool = True) -> httpx.Client:
    return httpx.Client(
        base_url=pve.api_url if real else pve.url,
        verify=pve.verify,
        timeout=10,
        headers={"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"},
    )


@pytest.fixture(scope="session")
def pve() -> Iterator[EmulatorHandle]:
    """This package's own demo emulator: these tests change state, so they leave the plugin's shared
    ``pve_emulator`` fixture (used read-only here) untouched for other packages' tests."""
    with running_emulator() as handle:
        yield handle


@pytest.fixture
def api(pve: EmulatorHandle) -> Iterator[httpx.Client]:
    """Token-authenticated client on the real paths."""
    with token_client(pve) as client:
        yield client


@pytest.fixture
def bare(pve: EmulatorHandle) -> Iterator[httpx.Client]:
    with token_client(pve, real=False) as client:
        yield client
