"""Plugin-side records as the push logic sees them (SPEC 2.6): plain values, built by the glue.

Keeping them as frozen dataclasses means core never touches a Django model, and a test can state a
record in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .urls import resolve_target

ACCESS_METHODS = ("token", "password")


@dataclass(frozen=True)
class InventoryEndpointRecord:
    """The plugin's inventory endpoint: NetBox as the backend must dial it."""

    pk: int
    name: str
    domain: str = ""
    ip_address: str | None = None
    port: int | None = 443
    scheme: str = "https"  # C1: how the backend dials NetBox; "http" sends the token in clear
    token_version: int = 2
    token_key: str = ""
    token: str = ""
    verify_ssl: bool = True
    enabled: bool = True
    pushed_credential_fingerprint: str = ""

    def resolved_target(self) -> tuple[str, int] | None:
        """Identity target read from the model, never from the push body (SPEC 4.5 rule 1)."""
        return resolve_target(self.domain, self.ip_address, self.port)


@dataclass(frozen=True)
class HvEndpointRecord:
    """The plugin's hv (Proxmox) endpoint."""

    pk: int
    name: str
    domain: str = ""
    ip_address: str | None = None
    port: int | None = 8006
    username: str = ""
    access_methods: tuple[str, ...] = ("token",)
    token_name: str = ""
    token_value: str = ""
    password: str = ""
    verify_ssl: bool = True
    enabled: bool = True
    allow_template_builds: bool = False
    timeout: int = 15
    max_retries: int = 2
    retry_backoff: float = 0.5
    template_build_grant_confirmed: bool = False
    extra: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def identity_suffix(self) -> str:
        """The immutable identity on the backend's wire: `(inv:<plugin_pk>)`."""
        return identity_suffix(self.pk)

    def resolved_target(self) -> tuple[str, int] | None:
        return resolve_target(self.domain, self.ip_address, self.port)


def identity_suffix(plugin_pk: int) -> str:
    return f"(inv:{int(plugin_pk)})"


def secrets_of(record: InventoryEndpointRecord | HvEndpointRecord) -> tuple[str, ...]:
    """Credential values of a record, for exact-match sweeping of messages."""
    if isinstance(record, InventoryEndpointRecord):
        return tuple(s for s in (record.token, record.token_key) if s)
    return tuple(s for s in (record.token_value, record.password) if s)
