"""Fixtures for the rule tests; the fakes live in fakes.py (a unique module name, so the
workspace-wide pytest run never confuses it with another package's helpers)."""

import pytest
from fakes import API_KEY, BASE, FakeTransport
from netbox_hvsync.rules.transport import BackendContext


@pytest.fixture
def ctx() -> BackendContext:
    return BackendContext(base_url=BASE, api_key=API_KEY, backend_endpoint_id=1)


@pytest.fixture
def transport() -> FakeTransport:
    return FakeTransport()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Pure-logic tests finish in milliseconds; a hang is a bug, so cap each at 30 s."""
    for item in items:
        if "tests/rules" in str(item.path):
            item.add_marker(pytest.mark.timeout(30))
