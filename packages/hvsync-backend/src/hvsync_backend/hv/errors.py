"""Typed Proxmox failures. Messages name the endpoint (id, name, host:port) and never carry credentials."""

from __future__ import annotations


class ProxmoxError(Exception):
    def __init__(self, endpoint_label: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{endpoint_label}: {message}")
        self.endpoint_label = endpoint_label
        self.message = message
        self.status = status


class ProxmoxUnreachable(ProxmoxError):
    """No HTTP answer: connection refused, DNS, TLS, timeout (after the configured retries)."""


class ProxmoxHTTPError(ProxmoxError):
    """Proxmox answered with an error status (``status``) or an unreadable body."""


class ProxmoxAuthError(ProxmoxHTTPError):
    """Authentication failed, or (``ProxmoxNotConfigured``) no usable credentials are stored."""


class ProxmoxNotConfigured(ProxmoxAuthError):
    """No usable credentials are stored for the endpoint's access methods: nothing was sent to Proxmox."""
