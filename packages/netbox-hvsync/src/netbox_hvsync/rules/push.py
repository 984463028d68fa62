"""Delivering the inventory and hv endpoint records to the backend (SPEC 4.5 "Push functions").

Push functions return the SPEC's `(ok, error message, HTTP status)`: `PushResult` unpacks as that
triple and carries a few extra facts the glue needs (the backend id, the confirmed template-build grant,
the failure kind). Identity is positional for the inventory singleton and by the `(inv:<pk>)` suffix
for hv rows, never by name. Messages are redacted: no credential ever reaches them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .constants import HV_PUSH_TIMEOUT, INVENTORY_PUSH_TIMEOUT, LOOPBACK_SUBSTITUTE
from .failures import APPLICATION, TRANSPORT, classify_answer
from .identity import rows_with_suffix
from .records import HvEndpointRecord, InventoryEndpointRecord, identity_suffix, secrets_of
from .redaction import redacted_detail, sweep_text
from .transport import BackendContext, JsonAnswer, Transport, TransportError, call
from .urls import TargetError, canonical_host, canonical_ip, check_endpoint_host

INVENTORY_PATH = "/inventory/endpoint"
HV_PATH = "/hv/endpoints"

#: The credential-free body that revokes a duplicate hv row (SPEC 4.5).
REVOCATION_BODY: Mapping[str, bool] = {"enabled": False, "allow_template_builds": False}


@dataclass(frozen=True)
class PushResult:
    """Outcome of one push; iterating yields the SPEC's `(ok, error, status)` triple."""

    ok: bool
    error: str
    status: int | None
    backend_id: int | None = None
    grant_confirmed: bool | None = None  # None: the push confirmed nothing, keep the stored flag
    failure_kind: str | None = None
    failed_rows: tuple[str, ...] = ()
    duplicate_claim: bool = False  # several backend rows claimed the suffix: the sync must be refused

    def __iter__(self) -> Iterator[Any]:
        return iter((self.ok, self.error, self.status))


@dataclass(frozen=True)
class Listing:
    """A backend row listing; `ok` false means the listing itself failed (unknown, not empty)."""

    ok: bool
    rows: tuple[Mapping[str, Any], ...] = ()
    error: str = ""
    status: int | None = None
    failure_kind: str | None = None


def refused_host(what: str, record: InventoryEndpointRecord | HvEndpointRecord) -> PushResult | None:
    """A record whose domain or IP the backend must never dial (issue 39) is not pushed: the IP address
    it links to may have been changed in IPAM since the endpoint was validated."""
    try:
        check_endpoint_host(record.domain, "domain")
        check_endpoint_host(record.ip_address, "ip_address")
    except TargetError as exc:
        return PushResult(False, f"{what} {record.pk}: {exc}; not pushed", None, failure_kind=APPLICATION)
    return None


def build_inventory_body(record: InventoryEndpointRecord) -> dict[str, Any]:
    """Inventory push body; a record without a linked IP sends the loopback substitute."""
    ip = canonical_ip(record.ip_address) if record.ip_address else None
    return {
        "name": record.name,
        "ip_address": ip or LOOPBACK_SUBSTITUTE,
        "domain": (canonical_host(record.domain) or record.domain.strip()) if record.domain else "",
        "port": record.port,
        "scheme": record.scheme,
        "token_version": record.token_version,
        "token_key": record.token_key,
        "token": record.token,
        "verify_ssl": record.verify_ssl,
        "enabled": record.enabled,
    }


def hv_wire_name(record: HvEndpointRecord) -> str:
    """`<display_name> (inv:<plugin_pk>)`; a suffix already present in the display name is not doubled."""
    suffix = identity_suffix(record.pk)
    display = record.name.strip()
    if display.endswith(suffix):
        display = display[: -len(suffix)].rstrip()
    return f"{display} {suffix}" if display else suffix


def build_hv_body(record: HvEndpointRecord) -> dict[str, Any]:
    """Hv push body; credentials only for the access methods in use, and only when set."""
    ip = canonical_ip(record.ip_address) if record.ip_address else None
    body: dict[str, Any] = {
        "name": hv_wire_name(record),
        "ip_address": ip or "",
        "domain": (canonical_host(record.domain) or record.domain.strip()) if record.domain else "",
        "port": record.port,
        "username": record.username,
        "access_methods": list(record.access_methods),
        "token_name": record.token_name,
        "verify_ssl": record.verify_ssl,
        "enabled": record.enabled,
        "allow_template_builds": record.allow_template_builds,
        "timeout": record.timeout,
        "max_retries": record.max_retries,
        "retry_backoff": record.retry_backoff,
    }
    if "token" in record.access_methods and record.token_value:
        body["token_value"] = record.token_value
    if "password" in record.access_methods and record.password:
        body["password"] = record.password
    return body


def _answer_error(what: str, answer: JsonAnswer, secrets: Sequence[str]) -> str:
    if answer.is_redirect:
        return f"{what}: redirect refused (HTTP {answer.status})"
    if not answer.is_json:
        return f"{what}: HTTP {answer.status} with a non-JSON body"
    return f"{what}: HTTP {answer.status}: {redacted_detail(answer.body, answer.text, secrets)}"


def _transport_error(what: str, exc: TransportError, secrets: Sequence[str]) -> str:
    return f"{what}: backend unreachable ({exc.kind}): {sweep_text(str(exc), secrets)}"


def list_rows(
    transport: Transport, ctx: BackendContext, path: str, *, timeout: float, secrets: Sequence[str] = ()
) -> Listing:
    """GET a row listing; anything but a 200 JSON list is a failed listing."""
    hidden = (*secrets, ctx.api_key)
    what = f"GET {path}"
    try:
        answer = call(transport, "GET", ctx.url(path), headers=ctx.auth_headers(), timeout=timeout)
    except TransportError as exc:
        return Listing(False, error=_transport_error(what, exc, hidden), failure_kind=TRANSPORT)
    if answer.status != 200 or not isinstance(answer.body, list):
        error = _answer_error(what, answer, hidden)
        if answer.status == 200:
            error = f"{what}: expected a JSON list of rows"
        return Listing(False, error=error, status=answer.status, failure_kind=classify_answer(answer))
    rows = tuple(row for row in answer.body if isinstance(row, Mapping))
    return Listing(True, rows=rows, status=answer.status)


def _row_id(row: Mapping[str, Any]) -> int | None:
    value = row.get("id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _created_id(answer: JsonAnswer) -> int | None:
    return _row_id(answer.body) if isinstance(answer.body, Mapping) else None


def _write(
    transport: Transport,
    ctx: BackendContext,
    method: str,
    path: str,
    body: Mapping[str, Any],
    *,
    timeout: float,
    secrets: Sequence[str],
    expect: tuple[int, ...],
) -> tuple[JsonAnswer | None, PushResult | None]:
    """Send one write; return (answer, None) on an expected status, else (None, failed result)."""
    what = f"{method} {path}"
    try:
        answer = call(
            transport, method, ctx.url(path), headers=ctx.auth_headers(), timeout=timeout, json=body
        )
    except TransportError as exc:
        return None, PushResult(False, _transport_error(what, exc, secrets), None, failure_kind=TRANSPORT)
    if answer.status not in expect:
        return None, PushResult(
            False, _answer_error(what, answer, secrets), answer.status, failure_kind=classify_answer(answer)
        )
    return answer, None


def push_inventory_endpoint(
    transport: Transport,
    ctx: BackendContext,
    record: InventoryEndpointRecord,
    *,
    timeout: float = INVENTORY_PUSH_TIMEOUT,
) -> PushResult:
    """GET the singleton listing; empty gives POST, otherwise PUT to the first row's id (by position)."""
    secrets = (*secrets_of(record), ctx.api_key)
    if record.port is None:
        return PushResult(
            False, f"inventory endpoint {record.pk}: port is required", None, failure_kind=APPLICATION
        )
    if (refused := refused_host("inventory endpoint", record)) is not None:
        return refused
    listing = list_rows(transport, ctx, INVENTORY_PATH, timeout=timeout, secrets=secrets)
    if not listing.ok:
        return PushResult(False, listing.error, listing.status, failure_kind=listing.failure_kind)
    body = build_inventory_body(record)
    if not listing.rows:
        answer, failed = _write(
            transport, ctx, "POST", INVENTORY_PATH, body, timeout=timeout, secrets=secrets, expect=(200, 201)
        )
        if failed:
            return failed
        assert answer is not None
        return PushResult(True, "", answer.status, backend_id=_created_id(answer))
    row_id = _row_id(listing.rows[0])
    if row_id is None:
        return PushResult(
            False,
            "GET /inventory/endpoint: first row has no usable id",
            listing.status,
            failure_kind=APPLICATION,
        )
    return _put_inventory_row(transport, ctx, row_id, body, timeout=timeout, secrets=secrets)


def _put_inventory_row(
    transport: Transport,
    ctx: BackendContext,
    row_id: int,
    body: Mapping[str, Any],
    *,
    timeout: float,
    secrets: Sequence[str],
) -> PushResult:
    """`PUT /inventory/endpoint/{id}`: the one write both the push and the disable make to the singleton."""
    answer, failed = _write(
        transport,
        ctx,
        "PUT",
        f"{INVENTORY_PATH}/{row_id}",
        body,
        timeout=timeout,
        secrets=secrets,
        expect=(200,),
    )
    if failed:
        return failed
    assert answer is not None
    return PushResult(True, "", answer.status, backend_id=row_id)


def push_hv_endpoint(
    transport: Transport,
    ctx: BackendContext,
    record: HvEndpointRecord,
    *,
    rows: Sequence[Mapping[str, Any]] | None = None,
    timeout: float = HV_PUSH_TIMEOUT,
) -> PushResult:
    """Push one hv endpoint; `rows` reuses a listing made once per preflight (SPEC 4.5 step 6).

    No suffix match gives POST, exactly one gives PUT. Several rows claiming one suffix get a
    credential-free revocation PUT each (continuing past failures); the push then fails, naming
    every failed row.
    """
    secrets = (*secrets_of(record), ctx.api_key)
    if record.port is None:
        return PushResult(False, f"hv endpoint {record.pk}: port is required", None, failure_kind=APPLICATION)
    if (refused := refused_host("hv endpoint", record)) is not None:
        return refused
    if rows is None:
        listing = list_rows(transport, ctx, HV_PATH, timeout=timeout, secrets=secrets)
        if not listing.ok:
            return PushResult(False, listing.error, listing.status, failure_kind=listing.failure_kind)
        rows = listing.rows
    matches = rows_with_suffix(record.pk, rows)
    if len(matches) > 1:
        return _revoke_duplicates(transport, ctx, record, matches, timeout=timeout, secrets=secrets)
    body = build_hv_body(record)
    grant = record.enabled and record.allow_template_builds
    if not matches:
        answer, failed = _write(
            transport, ctx, "POST", HV_PATH, body, timeout=timeout, secrets=secrets, expect=(200, 201)
        )
        if failed:
            return failed
        assert answer is not None
        return PushResult(True, "", answer.status, backend_id=_created_id(answer), grant_confirmed=grant)
    row_id = _row_id(matches[0])
    if row_id is None:
        return PushResult(
            False,
            f"hv endpoint {record.pk}: backend row {identity_suffix(record.pk)} has no usable id",
            None,
            failure_kind=APPLICATION,
        )
    path = f"{HV_PATH}/{row_id}"
    answer, failed = _write(
        transport, ctx, "PUT", path, body, timeout=timeout, secrets=secrets, expect=(200,)
    )
    if failed:
        return failed
    assert answer is not None
    return PushResult(True, "", answer.status, backend_id=row_id, grant_confirmed=grant)


def _revoke_duplicates(
    transport: Transport,
    ctx: BackendContext,
    record: HvEndpointRecord,
    matches: Sequence[Mapping[str, Any]],
    *,
    timeout: float,
    secrets: Sequence[str],
) -> PushResult:
    failed: list[str] = []
    last_status: int | None = None
    kind = APPLICATION
    for row in matches:
        row_id = _row_id(row)
        if row_id is None:
            failed.append(f"row {sweep_text(str(row.get('name')), secrets)!r}: no usable id, not revocable")
            continue
        path = f"{HV_PATH}/{row_id}"
        _, result = _write(
            transport, ctx, "PUT", path, REVOCATION_BODY, timeout=timeout, secrets=secrets, expect=(200,)
        )
        if result is not None:
            failed.append(f"row {row_id}: {result.error}")
            last_status = result.status
            kind = result.failure_kind or kind
    suffix = identity_suffix(record.pk)
    message = (
        f"hv endpoint {record.pk}: {len(matches)} backend rows claim {suffix}; sync refused until the "
        "duplicates are removed"
    )
    if failed:
        message += "; revocation failed for " + "; ".join(failed)
    else:
        message += "; every duplicate was revoked (enabled and allow_template_builds false)"
    return PushResult(
        False,
        message,
        last_status if failed else None,
        grant_confirmed=None if failed else False,
        failure_kind=kind,
        failed_rows=tuple(failed),
        duplicate_claim=True,
    )


def disable_inventory_row(
    transport: Transport, ctx: BackendContext, *, timeout: float = INVENTORY_PUSH_TIMEOUT
) -> PushResult:
    """No inventory endpoint is enabled in the plugin: the backend's singleton row goes enabled false.

    Idempotent and credential-free (`{"enabled": false}` moves nothing, so C2 needs no token): a row
    already disabled, or no row at all, is left alone. Run on the save that disabled the endpoint and
    again by every preflight and push until the backend confirms, so a failed disable is retried."""
    secrets = (ctx.api_key,)
    listing = list_rows(transport, ctx, INVENTORY_PATH, timeout=timeout, secrets=secrets)
    if not listing.ok:
        return PushResult(False, listing.error, listing.status, failure_kind=listing.failure_kind)
    live = [row for row in listing.rows if row.get("enabled") is not False]
    if not live:
        return PushResult(True, "", listing.status)
    row_id = _row_id(live[0])
    if row_id is None:
        return PushResult(
            False, "GET /inventory/endpoint: row has no usable id", None, failure_kind=APPLICATION
        )
    return _put_inventory_row(transport, ctx, row_id, {"enabled": False}, timeout=timeout, secrets=secrets)


def retire_hv_rows(
    transport: Transport,
    ctx: BackendContext,
    plugin_pk: int,
    *,
    rows: Sequence[Mapping[str, Any]] | None = None,
    timeout: float = HV_PUSH_TIMEOUT,
) -> PushResult:
    """A deleted Proxmox endpoint (C3): `POST /hv/endpoints/{id}/retire` for every backend row that claims
    its `(inv:<pk>)` suffix (identity by suffix, never by a stored id). No such row is success (nothing to
    retire); a 404 means the row went meanwhile. The backend disables the row and wipes its credentials."""
    secrets = (ctx.api_key,)
    if rows is None:
        listing = list_rows(transport, ctx, HV_PATH, timeout=timeout, secrets=secrets)
        if not listing.ok:
            return PushResult(False, listing.error, listing.status, failure_kind=listing.failure_kind)
        rows = listing.rows
    failed: list[str] = []
    last: PushResult | None = None
    for row in rows_with_suffix(plugin_pk, rows):
        row_id = _row_id(row)
        if row_id is None:
            failed.append("a row without a usable id")
            continue
        path = f"{HV_PATH}/{row_id}/retire"
        _, result = _write(
            transport, ctx, "POST", path, {}, timeout=timeout, secrets=secrets, expect=(200, 404)
        )
        if result is not None:
            failed.append(result.error)
            last = result
    if failed:
        return PushResult(
            False,
            f"retiring hv endpoint {plugin_pk} on the backend failed: " + "; ".join(failed),
            last.status if last else None,
            failure_kind=(last.failure_kind if last else APPLICATION),
        )
    return PushResult(True, "", 200)


def store_fingerprint_after_push(
    result: PushResult,
    fingerprint: str,
    write_fingerprint: Callable[[str], None],
    log_error: Callable[[str], None],
) -> bool:
    """After a successful inventory push, store the fingerprint with a filtered update (never a full
    save, which would re-trigger the push). A database error is logged, not raised; the field then
    stays as it was, and an empty fingerprint reads as changed."""
    if not result.ok:
        return False
    try:
        write_fingerprint(fingerprint)
    except Exception as exc:  # the push succeeded; a bookkeeping failure must not undo it
        log_error(f"could not store the pushed credential fingerprint: {type(exc).__name__}")
        return False
    return True
