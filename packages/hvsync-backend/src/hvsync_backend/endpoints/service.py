"""Decrypted endpoint configurations for the code that dials NetBox and Proxmox (the sync engine, hv routes).

These objects hold plaintext credentials in memory only; their ``repr`` hides them. Never log or return them.
Sync functions take an :class:`EndpointRegistry`; the ``a``-prefixed variants run them in a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import anyio.to_thread
from sqlalchemy import select

from hvsync_backend.db.models import HvEndpoint, InventoryEndpoint
from hvsync_backend.endpoints.registry import EndpointRegistry
from hvsync_backend.errors import UnknownHvEndpoints
from hvsync_backend.inventory.tokens import auth_header


def _host_for_url(ip_address: str, domain: str) -> str:
    host = domain or ip_address
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass(frozen=True)
class InventoryTarget:
    """How to call NetBox: ``url`` (no trailing slash), TLS verification and ready-made auth headers."""

    id: int
    name: str
    url: str
    verify_ssl: bool
    enabled: bool
    token_version: int
    headers: dict[str, str] = field(repr=False)


@dataclass(frozen=True)
class HvTarget:
    """One Proxmox VE endpoint with its policy; ``api_url`` ends in ``/api2/json``."""

    id: int
    name: str
    host: str
    port: int
    scheme: str
    api_url: str
    username: str
    token_name: str
    access_methods: tuple[str, ...]
    verify_ssl: bool
    enabled: bool
    allow_template_builds: bool
    timeout: float
    max_retries: int
    retry_backoff: float
    site_slug: str = ""
    tenant_slug: str = ""
    password: str | None = field(default=None, repr=False)
    token_value: str | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        """How error messages name the endpoint: never a credential."""
        return f"hv endpoint {self.id} '{self.name}' ({self.host}:{self.port})"

    def fingerprint(self) -> tuple[object, ...]:
        """Changes whenever anything that affects a connection changes (used to rebuild cached clients)."""
        return (
            self.api_url,
            self.username,
            self.token_name,
            self.access_methods,
            self.verify_ssl,
            self.timeout,
            self.max_retries,
            self.retry_backoff,
            self.password,
            self.token_value,
        )


def inventory_auth_headers(token_version: int, token: str | None, token_key: str | None) -> dict[str, str]:
    """The NetBox token header (`inventory.tokens.auth_header`); none without a usable token."""
    if not token:
        return {}
    try:
        return {"Authorization": auth_header(token_version, token, token_key)}
    except ValueError:  # a v2 token without its key: no header, and the run says so
        return {}


def _inventory_target(registry: EndpointRegistry, row: InventoryEndpoint) -> InventoryTarget:
    scheme = row.scheme
    host = _host_for_url(row.ip_address, row.domain)
    default_port = (scheme == "https" and row.port == 443) or (scheme == "http" and row.port == 80)
    url = f"{scheme}://{host}" if default_port else f"{scheme}://{host}:{row.port}"
    cipher = registry.cipher
    headers = inventory_auth_headers(
        row.token_version, cipher.decrypt_optional(row.token_enc), cipher.decrypt_optional(row.token_key_enc)
    )
    return InventoryTarget(
        id=row.id,
        name=row.name,
        url=url,
        verify_ssl=row.verify_ssl,
        enabled=row.enabled,
        token_version=row.token_version,
        headers=headers,
    )


def hv_target(registry: EndpointRegistry, row: HvEndpoint) -> HvTarget:
    host = _host_for_url(row.ip_address, row.domain)
    cipher = registry.cipher
    return HvTarget(
        id=row.id,
        name=row.name,
        host=row.domain or row.ip_address,
        port=row.port,
        scheme=row.scheme,
        api_url=f"{row.scheme}://{host}:{row.port}/api2/json",
        username=row.username,
        token_name=row.token_name,
        access_methods=tuple(row.access_methods),
        verify_ssl=row.verify_ssl,
        enabled=row.enabled,
        allow_template_builds=row.allow_template_builds,
        timeout=float(row.timeout),
        max_retries=row.max_retries,
        retry_backoff=row.retry_backoff,
        site_slug=row.site_slug,
        tenant_slug=row.tenant_slug,
        password=cipher.decrypt_optional(row.password_enc),
        token_value=cipher.decrypt_optional(row.token_value_enc),
    )


def get_inventory_target(registry: EndpointRegistry, enabled_only: bool = True) -> InventoryTarget | None:
    """The NetBox endpoint with decrypted credentials, or None when none is stored (or it is disabled)."""
    with registry.session_factory() as session:
        row = session.scalars(select(InventoryEndpoint).order_by(InventoryEndpoint.id)).first()
        if row is None or (enabled_only and not row.enabled):
            return None
        return _inventory_target(registry, row)


def get_hv_targets(
    registry: EndpointRegistry, ids: Iterable[int] | None = None, enabled_only: bool = True
) -> list[HvTarget]:
    """Proxmox endpoints with decrypted credentials: every enabled one, or exactly ``ids``.

    Raises :class:`UnknownHvEndpoints` when an id is not stored. With ``ids`` given, disabled endpoints
    among them are still left out when ``enabled_only`` is true.
    """
    wanted = None if ids is None else list(dict.fromkeys(ids))
    with registry.session_factory() as session:
        stmt = select(HvEndpoint).order_by(HvEndpoint.id)
        if wanted is not None:
            stmt = stmt.where(HvEndpoint.id.in_(wanted))
        rows = list(session.scalars(stmt))
        if wanted is not None:
            missing = sorted(set(wanted) - {r.id for r in rows})
            if missing:
                raise UnknownHvEndpoints(missing)
        return [hv_target(registry, r) for r in rows if r.enabled or not enabled_only]


async def aget_inventory_target(
    registry: EndpointRegistry, enabled_only: bool = True
) -> InventoryTarget | None:
    return await anyio.to_thread.run_sync(lambda: get_inventory_target(registry, enabled_only))


async def aget_hv_targets(
    registry: EndpointRegistry, ids: Iterable[int] | None = None, enabled_only: bool = True
) -> list[HvTarget]:
    id_list = None if ids is None else list(ids)
    return await anyio.to_thread.run_sync(lambda: get_hv_targets(registry, id_list, enabled_only))
