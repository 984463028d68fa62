"""Async NetBox REST client used by the sync stages."""

from hvsync_backend.inventory.client import NetBoxClient, NetBoxConfig, WriteStats
from hvsync_backend.inventory.errors import NetBoxAuthError, NetBoxError, NetBoxHTTPError, NetBoxUnreachable

__all__ = [
    "NetBoxAuthError",
    "NetBoxClient",
    "NetBoxConfig",
    "NetBoxError",
    "NetBoxHTTPError",
    "NetBoxUnreachable",
    "WriteStats",
]
