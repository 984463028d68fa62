"""Pushing the plugin's inventory and hv endpoint records to the backend (SPEC 4.5 "Push functions", 2.6).

Core decides what to send and what the answer means; this module reads the models into core records,
resolves which backend to talk to, and writes the bookkeeping back with filtered `update()` calls (the
fingerprint, the backend id, the confirmed template-build grant), never with `save()`, which would fire
the post-save push again.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError

from netbox_hvsync.backend_http import STREAM_READ_TIMEOUT, RequestsTransport
from netbox_hvsync.core.fingerprints import credential_fingerprint
from netbox_hvsync.core.grants import next_grant_confirmed
from netbox_hvsync.core.push import (
    PushResult,
    push_hv_endpoint,
    push_inventory_endpoint,
    store_fingerprint_after_push,
)
from netbox_hvsync.core.records import HvEndpointRecord, InventoryEndpointRecord
from netbox_hvsync.core.transport import BackendContext
from netbox_hvsync.core.urls import CanonicalTarget, TargetError, canonicalize_target
from netbox_hvsync.crypto import CredentialDecryptionError
from netbox_hvsync.models import BackendEndpoint, HvEndpoint, InventoryEndpoint

logger = logging.getLogger("netbox_hvsync.push")

FINGERPRINT_INFO = b"netbox-hvsync fingerprint"
#: Below twice the backend's 15 s keep-alive interval a healthy but busy stage could time out.
MIN_STREAM_READ_TIMEOUT = 30


def fingerprint_key() -> bytes:
    """The plugin-held HMAC key for credential fingerprints, derived from SECRET_KEY (never stored)."""
    return hmac.new(str(settings.SECRET_KEY).encode(), FINGERPRINT_INFO, hashlib.sha256).digest()


def _ip_text(obj: Any) -> str | None:
    ip = getattr(obj, "ip_address", None)
    return str(ip.address.ip) if ip is not None else None


def inventory_record(endpoint: InventoryEndpoint) -> InventoryEndpointRecord:
    return InventoryEndpointRecord(
        pk=endpoint.pk,
        name=endpoint.name,
        domain=endpoint.domain or "",
        ip_address=_ip_text(endpoint),
        port=endpoint.port,
        token_version=int(endpoint.token_version),
        token_key=endpoint.token_key or "",
        token=endpoint.token,
        verify_ssl=endpoint.verify_ssl,
        enabled=endpoint.enabled,
        pushed_credential_fingerprint=endpoint.pushed_credential_fingerprint or "",
    )


def hv_record(endpoint: HvEndpoint) -> HvEndpointRecord:
    return HvEndpointRecord(
        pk=endpoint.pk,
        name=endpoint.name,
        domain=endpoint.domain or "",
        ip_address=_ip_text(endpoint),
        port=endpoint.port,
        username=endpoint.username,
        access_methods=tuple(endpoint.access_methods or ()),
        token_name=endpoint.token_name or "",
        token_value=endpoint.token_value,
        password=endpoint.password,
        verify_ssl=endpoint.verify_ssl,
        enabled=endpoint.enabled,
        allow_template_builds=endpoint.allow_template_builds,
        timeout=endpoint.timeout,
        max_retries=endpoint.max_retries,
        retry_backoff=endpoint.retry_backoff,
        template_build_grant_confirmed=endpoint.template_build_grant_confirmed,
    )


def backend_target(backend: BackendEndpoint) -> CanonicalTarget:
    """The canonical target of a backend endpoint row (SPEC 5.2.5); raises TargetError naming the field."""
    if backend.url:
        url_has_port = urlsplit(backend.url if "://" in backend.url else f"//{backend.url}").port is not None
        return canonicalize_target(backend.url, None if url_has_port else backend.port, field="url")
    ip = _ip_text(backend)
    if not ip:
        raise TargetError("url", "give the backend URL or an IP address")
    return canonicalize_target(ip, backend.port, field="ip_address", default_scheme="http")


def backend_candidates(backend: BackendEndpoint) -> list[CanonicalTarget]:
    """Every address of one backend, hostname first (SPEC 6.2, 7.3): its URL, then its IP address.

    The IP candidate takes the URL's scheme and port, so both candidates name the same service; a row
    with only one of the two has one candidate. Raises TargetError naming the field for a bad value."""
    first = backend_target(backend)
    ip = _ip_text(backend) if backend.url else None
    if not ip:
        return [first]
    second = canonicalize_target(ip, first.port, field="ip_address", default_scheme=first.scheme)
    return [first] if second.base_url == first.base_url else [first, second]


@dataclass(frozen=True)
class ResolvedBackend:
    """A usable backend endpoint: its row, the request context and a transport bound to its TLS policy.

    `candidates` holds one context per address of the backend (hostname, then IP); `context` is the one
    in use. Jobs switch to another candidate when the one in use cannot be reached."""

    row: BackendEndpoint
    context: BackendContext
    transport: RequestsTransport
    candidates: tuple[BackendContext, ...] = field(default=())

    @property
    def all_candidates(self) -> tuple[BackendContext, ...]:
        return self.candidates or (self.context,)

    def using(self, context: BackendContext) -> ResolvedBackend:
        return replace(self, context=context)


def stream_read_timeout() -> float:
    """`PLUGINS_CONFIG["netbox_hvsync"]["stream_read_timeout"]`: seconds to wait for the next chunk of a
    stage stream (the backend sends a keep-alive every 15 s, so keep it well above that)."""
    from netbox.plugins import get_plugin_config

    value = get_plugin_config("netbox_hvsync", "stream_read_timeout", STREAM_READ_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < MIN_STREAM_READ_TIMEOUT:
        logger.warning(
            "stream_read_timeout must be a number of seconds >= %s; using %s",
            MIN_STREAM_READ_TIMEOUT,
            STREAM_READ_TIMEOUT,
        )
        return STREAM_READ_TIMEOUT
    return float(value)


def usable_backends(selected_id: int | None = None) -> Iterable[BackendEndpoint]:
    qs = BackendEndpoint.objects.filter(enabled=True).exclude(token_ciphertext="").order_by("pk")
    return qs.filter(pk=selected_id) if selected_id is not None else qs


def resolve_backend(selected_id: int | None = None) -> ResolvedBackend | None:
    """The backend a job or push talks to: the pinned row, else the first enabled one holding a key.

    A row whose key cannot be decrypted or whose target does not canonicalize is not usable (B1)."""
    for row in usable_backends(selected_id):
        try:
            targets = backend_candidates(row)
            key = row.token
        except (TargetError, CredentialDecryptionError) as exc:
            logger.warning("backend endpoint %s is not usable: %s", row.pk, type(exc).__name__)
            continue
        if not key:
            continue
        contexts = tuple(
            BackendContext(base_url=t.base_url, api_key=key, backend_endpoint_id=row.pk) for t in targets
        )
        transport = RequestsTransport(verify_ssl=row.verify_ssl, read_timeout=stream_read_timeout())
        return ResolvedBackend(row, contexts[0], transport, contexts)
    return None


def record_inventory_push(endpoint_pk: int, record: InventoryEndpointRecord, result: PushResult) -> bool:
    """After a successful push, store the fingerprint with a filtered update (a DB error is logged)."""

    def write(value: str) -> None:
        InventoryEndpoint.objects.filter(pk=endpoint_pk).update(pushed_credential_fingerprint=value)

    fp = credential_fingerprint(fingerprint_key(), record.token_version, record.token_key, record.token)
    return store_fingerprint_after_push(result, fp, write, lambda msg: logger.error(msg))


def record_hv_push(record: HvEndpointRecord, result: PushResult) -> None:
    """Backend id and confirmed grant (SPEC 2.6): a failed revocation leaves the stored flag as it was."""
    fields: dict[str, Any] = {}
    grant = next_grant_confirmed(record.template_build_grant_confirmed, result)
    if grant != record.template_build_grant_confirmed:
        fields["template_build_grant_confirmed"] = grant
    if result.ok and result.backend_id is not None:
        fields["backend_id"] = result.backend_id
    if not fields:
        return
    try:
        # QuerySet.update on the base manager: the guarded queryset refuses toggling `enabled` and
        # `allow_template_builds`, not this bookkeeping flag.
        HvEndpoint.objects.filter(pk=record.pk).update(**fields)
    except DatabaseError as exc:
        logger.error("could not store the push result of hv endpoint %s: %s", record.pk, type(exc).__name__)


def push_inventory(resolved: ResolvedBackend, endpoint: InventoryEndpoint) -> PushResult:
    record = inventory_record(endpoint)
    result = push_inventory_endpoint(resolved.transport, resolved.context, record)
    record_inventory_push(endpoint.pk, record, result)
    return result


def push_hv(
    resolved: ResolvedBackend, endpoint: HvEndpoint, rows: Sequence[Mapping[str, Any]] | None = None
) -> PushResult:
    record = hv_record(endpoint)
    result = push_hv_endpoint(resolved.transport, resolved.context, record, rows=rows)
    record_hv_push(record, result)
    return result


def push_hv_by_pk(pk: int) -> PushResult | None:
    """Re-read the row (after commit) and push it; None when there is no usable backend or no row."""
    endpoint = HvEndpoint.objects.filter(pk=pk).select_related("ip_address").first()
    resolved = resolve_backend()
    if endpoint is None or resolved is None:
        return None
    try:
        return push_hv(resolved, endpoint)
    finally:
        resolved.transport.close()


def push_inventory_by_pk(pk: int) -> PushResult | None:
    """Push one inventory endpoint to the singleton backend; None without a usable backend or row."""
    endpoint = InventoryEndpoint.objects.filter(pk=pk, enabled=True).select_related("ip_address").first()
    resolved = resolve_backend()
    if endpoint is None or resolved is None:
        return None
    try:
        return push_inventory(resolved, endpoint)
    finally:
        resolved.transport.close()
