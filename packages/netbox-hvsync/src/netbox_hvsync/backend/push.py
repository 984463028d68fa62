"""Pushing the plugin's inventory and hv endpoint records to the backend (SPEC 4.5 "Push functions", 2.6).

Rules decide what to send and what the answer means; this module reads the models into rule records,
and writes the bookkeeping back with filtered `update()` calls (the fingerprint, the backend id, the
confirmed template-build grant), never with `save()`, which would fire the post-save push again.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from netbox_hvsync.backend.resolution import ResolvedBackend, ip_text, resolve_backend
from netbox_hvsync.crypto import CredentialDecryptionError, undecryptable
from netbox_hvsync.models import HvEndpoint, InventoryEndpoint, PendingRetirement
from netbox_hvsync.rules.fingerprints import credential_fingerprint
from netbox_hvsync.rules.grants import next_grant_confirmed
from netbox_hvsync.rules.push import (
    PushResult,
    disable_inventory_row,
    push_hv_endpoint,
    push_inventory_endpoint,
    retire_hv_rows,
    store_fingerprint_after_push,
)
from netbox_hvsync.rules.records import HvEndpointRecord, InventoryEndpointRecord
from netbox_hvsync.rules.redaction import sweep_text
from netbox_hvsync.rules.transport import BackendContext, Transport

logger = logging.getLogger("netbox_hvsync.push")

FINGERPRINT_INFO = b"netbox-hvsync fingerprint"


def fingerprint_key() -> bytes:
    """The plugin-held HMAC key for credential fingerprints, derived from SECRET_KEY (never stored)."""
    return hmac.new(str(settings.SECRET_KEY).encode(), FINGERPRINT_INFO, hashlib.sha256).digest()


def inventory_record(endpoint: InventoryEndpoint) -> InventoryEndpointRecord:
    return InventoryEndpointRecord(
        pk=endpoint.pk,
        name=endpoint.name,
        domain=endpoint.domain or "",
        ip_address=ip_text(endpoint),
        port=endpoint.port,
        scheme=endpoint.scheme,
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
        ip_address=ip_text(endpoint),
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
    try:
        record = inventory_record(endpoint)
    except CredentialDecryptionError:  # nothing is sent
        return PushResult(False, undecryptable(endpoint), None)
    result = push_inventory_endpoint(resolved.transport, resolved.context, record)
    record_inventory_push(endpoint.pk, record, result)
    return result


def push_hv(
    resolved: ResolvedBackend, endpoint: HvEndpoint, rows: Sequence[Mapping[str, Any]] | None = None
) -> PushResult:
    try:
        record = hv_record(endpoint)
    except CredentialDecryptionError:  # nothing is sent
        return PushResult(False, undecryptable(endpoint), None)
    result = push_hv_endpoint(resolved.transport, resolved.context, record, rows=rows)
    record_hv_push(record, result)
    return result


def record_retirement(endpoint: HvEndpoint) -> None:
    """A Proxmox endpoint is being deleted: remember its backend row for retirement (C3), in the delete's
    own transaction, so a backend that is down now is retired by the next preflight or push."""
    PendingRetirement.objects.update_or_create(
        hv_endpoint_pk=endpoint.pk,
        defaults={"backend_id": endpoint.backend_id, "name": endpoint.backend_name},
    )


def retire_pending(transport: Transport, ctx: BackendContext) -> list[str]:
    """Retire every pending deleted endpoint's backend rows (C3); a confirmed one is forgotten, a failed
    one is kept (attempts, last error) for the next preflight or push. Returns one warning per failure."""
    warnings = []
    for pending in PendingRetirement.objects.order_by("pk"):
        result = retire_hv_rows(transport, ctx, pending.hv_endpoint_pk)
        if result.ok:
            PendingRetirement.objects.filter(pk=pending.pk).delete()
            logger.info("deleted hv endpoint %s retired on the backend", pending.hv_endpoint_pk)
            continue
        error = sweep_text(result.error, (ctx.api_key,))
        PendingRetirement.objects.filter(pk=pending.pk).update(
            attempts=pending.attempts + 1, last_error=error[:500]
        )
        warnings.append(f"{error}; retried at the next preflight or push")
    return warnings


def disable_on_backend(resolved: ResolvedBackend) -> PushResult | None:
    """When no inventory endpoint is enabled, the backend's inventory row goes enabled false (idempotent)."""
    if InventoryEndpoint.objects.filter(enabled=True).exists():
        return None  # the enabled one owns the backend's singleton row
    return disable_inventory_row(resolved.transport, resolved.context)


def _retry_pending(resolved: ResolvedBackend) -> None:
    """Every push also retries what an earlier push left undone: retirements and an inventory disable."""
    for warning in retire_pending(resolved.transport, resolved.context):
        logger.warning("%s", warning)
    if not InventoryEndpoint.objects.filter(enabled=True).exists() and InventoryEndpoint.objects.exists():
        result = disable_on_backend(resolved)
        if result is not None and not result.ok:
            logger.warning("disabling the backend's inventory endpoint failed: %s", result.error)


def push_hv_by_pk(pk: int) -> PushResult | None:
    """Re-read the row (after commit) and push it; None when there is no usable backend or no row."""
    endpoint = HvEndpoint.objects.filter(pk=pk).select_related("ip_address").first()
    resolved = resolve_backend()
    if endpoint is None or resolved is None:
        return None
    try:
        _retry_pending(resolved)
        return push_hv(resolved, endpoint)
    finally:
        resolved.transport.close()


def push_inventory_by_pk(pk: int) -> PushResult | None:
    """Push one inventory endpoint to the singleton backend; a disabled one disables the backend's row
    when no other inventory endpoint is enabled. None without a usable backend or row."""
    endpoint = InventoryEndpoint.objects.filter(pk=pk).select_related("ip_address").first()
    resolved = resolve_backend()
    if endpoint is None or resolved is None:
        return None
    try:
        if not endpoint.enabled:
            result = disable_on_backend(resolved)
            retire_pending(resolved.transport, resolved.context)
            return result
        _retry_pending(resolved)
        return push_inventory(resolved, endpoint)
    finally:
        resolved.transport.close()


def retire_by_pk(pk: int) -> PushResult | None:
    """After a delete commits: retire the pending rows now (the deleted one among them)."""
    resolved = resolve_backend()
    if resolved is None or not PendingRetirement.objects.filter(hv_endpoint_pk=pk).exists():
        return None
    try:
        warnings = retire_pending(resolved.transport, resolved.context)
    finally:
        resolved.transport.close()
    if PendingRetirement.objects.filter(hv_endpoint_pk=pk).exists():
        return PushResult(False, "; ".join(warnings) or f"hv endpoint {pk}: retirement pending", None)
    return PushResult(True, "", 200)
