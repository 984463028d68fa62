"""Deletion requests in action (issue 40): raise one for an object gone from Proxmox, withdraw it when the
object comes back, approve or reject it (four eyes), apply it (delete the object the NetBox way).

The rules (who may decide, which moves are allowed, expiry, what applying does) are `rules.deletions`'; this
module moves the records. Every move saves the request with a NetBox snapshot, so it is in the changelog
whenever a request context is active (UI, REST, a NetBox job), and writes a journal entry on the object.

Callers (the sync's gone marks, the UI, REST):
- `raise_request(obj, sidecar=..., endpoint=..., reason=..., requested_by=..., run_id=...)`: idempotent;
  returns the object's open request when it has one.
- `withdraw_for(obj)`: the object is back in Proxmox; its pending requests become `withdrawn`.
- `approve(request, user=..., comment=...)`: four eyes, then applies at once (approved -> applied | failed,
  or withdrawn when the re-check finds the object back). `user=None` is the endpoint's unattended mode:
  allowed only when the request's endpoint has `auto_approve_deletions` set.
- `reject(request, user=..., comment=...)`; `apply(request, user=...)` (an approved request only).
Refusals raise `DecisionRefused` whose `kind` is the HTTP answer's (forbidden 403, conflict 409).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, router, transaction
from django.db.models.deletion import Collector, ProtectedError, RestrictedError
from django.utils import timezone
from netbox.plugins import get_plugin_config
from utilities.exceptions import AbortRequest
from utilities.serialization import serialize_object

from netbox_hvsync.models import DeletionRequest
from netbox_hvsync.models import sidecars as sidecar_models
from netbox_hvsync.rules import deletions as rules
from netbox_hvsync.rules.deletions import Refusal

logger = logging.getLogger("netbox_hvsync.deletions")

__all__ = (
    "DecisionRefused",
    "apply",
    "approve",
    "expire_stale",
    "identity_of",
    "open_request_for",
    "raise_request",
    "reject",
    "sidecar_of",
    "withdraw_for",
)

#: How long the re-check read of Proxmox may take (one backend call).
RECHECK_TIMEOUT = 30.0

#: NetBox model label -> (sidecar model, its link field): where an object's hvsync identity lives.
SIDECARS: dict[str, tuple[type[Any], str]] = {
    "virtualization.virtualmachine": (sidecar_models.SyncedVirtualMachine, "virtual_machine"),
    "virtualization.virtualdisk": (sidecar_models.SyncedVirtualDisk, "virtual_disk"),
    "virtualization.vminterface": (sidecar_models.SyncedInterface, "vm_interface"),
    "dcim.interface": (sidecar_models.SyncedInterface, "interface"),
    "dcim.device": (sidecar_models.SyncedDevice, "device"),
    "ipam.ipaddress": (sidecar_models.SyncedIPAddress, "ip_address"),
    "ipam.vlan": (sidecar_models.SyncedVLAN, "vlan"),
    "ipam.prefix": (sidecar_models.SyncedPrefix, "prefix"),
}


class DecisionRefused(Exception):
    """A decision or an application that the rules refuse; `kind` is forbidden, conflict or invalid."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.kind = refusal.kind
        self.message = refusal.message


def _label(obj: Any) -> str:
    return f"{obj._meta.app_label}.{obj._meta.model_name}"


def sidecar_of(obj: Any) -> Any | None:
    """The object's sync-state record (its hvsync identity), or None when hvsync does not manage it."""
    found = SIDECARS.get(_label(obj))
    if found is None or obj.pk is None:
        return None
    model, field = found
    return model.objects.filter(**{field: obj.pk}).first()


def identity_of(sidecar: Any | None) -> str:
    """A sidecar's identity as a request stores it: kind, endpoint and Proxmox key (`qemu/101`, ...)."""
    if sidecar is None:
        return ""
    return f"{sidecar._meta.model_name}:{sidecar.endpoint_id}:{sidecar}"[:200]


def open_request_for(obj: Any) -> DeletionRequest | None:
    """The object's open (pending or approved) request, if any (at most one: a DB constraint)."""
    return (
        DeletionRequest.objects.filter(
            object_type=ContentType.objects.get_for_model(obj),
            object_id=obj.pk,
            status__in=rules.OPEN_STATUSES,
        )
        .order_by("pk")
        .first()
    )


def _journal(obj: Any, user: Any, kind: str, text: str) -> None:
    """A line in the object's journal (NetBox's JournalEntry), when its model keeps one."""
    if obj is None or not hasattr(obj, "journal_entries"):
        return
    from extras.models import JournalEntry

    entry = JournalEntry(assigned_object=obj, created_by=user if _is_user(user) else None, kind=kind)
    entry.comments = text
    entry.full_clean()
    entry.save()


def _is_user(user: Any) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def _target(request: DeletionRequest) -> Any | None:
    model = request.object_type.model_class()
    return None if model is None else model.objects.filter(pk=request.object_id).first()


def _link(request: DeletionRequest) -> str:
    return f"[deletion request {request.pk}]({request.get_absolute_url()})"


def _move(request: DeletionRequest, status: str, **fields: Any) -> DeletionRequest:
    """Save `request` in `status` with `fields`, with a snapshot (the changelog shows the move)."""
    if not rules.may_move(request.status, status):
        raise DecisionRefused(
            Refusal("conflict", f"the request is already {request.status}; it cannot become {status}")
        )
    request.snapshot()
    request.status = status
    for name, value in fields.items():
        setattr(request, name, value)
    request.full_clean()
    request.save()
    return request


def raise_request(
    obj: Any,
    *,
    sidecar: Any | None,
    endpoint: Any | None,
    reason: str,
    requested_by: Any | None,
    run_id: str = "",
    job: Any | None = None,
    gone_since: datetime | None = None,
) -> DeletionRequest | None:
    """Ask for `obj`'s deletion; returns its open request when it already has one (idempotent).

    None when there is nothing to ask for (no object, or not saved). `gone_since` defaults to the
    sidecar's mark (issue 40 section 1)."""
    if obj is None or obj.pk is None:
        return None
    expire_stale()
    existing = open_request_for(obj)
    if existing is not None:
        return existing
    request = DeletionRequest(
        endpoint=endpoint if endpoint is not None else getattr(sidecar, "endpoint", None),
        object_type=ContentType.objects.get_for_model(obj),
        object_id=obj.pk,
        object_repr=str(obj)[:200],
        identity=identity_of(sidecar),
        run_id=(run_id or "")[:64],
        job=job,
        reason=reason,
        gone_since=gone_since if gone_since is not None else getattr(sidecar, "gone_since", None),
        requested_by=requested_by if _is_user(requested_by) else None,
    )
    try:
        with transaction.atomic():
            request.full_clean(validate_constraints=False)
            request.save()
            _journal(obj, requested_by, "warning", f"Deletion requested ({_link(request)}): {reason}")
    except IntegrityError:
        # another run raised it between our look and our insert: the constraint keeps one open request
        return open_request_for(obj)
    return request


def withdraw_for(obj: Any, *, reason: str = "the object is back in Proxmox") -> int:
    """The object came back: its pending requests become `withdrawn`; returns how many."""
    if obj is None or obj.pk is None:
        return 0
    count = 0
    with transaction.atomic():
        rows = DeletionRequest.objects.select_for_update().filter(
            object_type=ContentType.objects.get_for_model(obj), object_id=obj.pk, status=rules.PENDING
        )
        for request in rows:
            _move(request, rules.WITHDRAWN, decided_at=timezone.now(), comment=reason)
            _journal(obj, None, "info", f"Deletion request withdrawn ({_link(request)}): {reason}")
            count += 1
    return count


def expire_stale(now: datetime | None = None) -> int:
    """Pending requests older than `deletion_request_max_age_days` become `expired`; returns how many.

    Applied lazily: whenever requests are listed or shown (UI, REST), decided, or raised."""
    max_age = int(get_plugin_config("netbox_hvsync", "deletion_request_max_age_days") or 0)
    cutoff = rules.expiry_cutoff(now or timezone.now(), max_age)
    if cutoff is None:
        return 0
    count = 0
    with transaction.atomic():
        for request in DeletionRequest.objects.select_for_update(skip_locked=True).filter(
            status=rules.PENDING, created__lt=cutoff
        ):
            _move(request, rules.EXPIRED, comment=f"expired: pending for more than {max_age} days")
            _journal(_target(request), None, "info", f"Deletion request expired ({_link(request)})")
            count += 1
    return count


def _locked(request: DeletionRequest) -> DeletionRequest:
    return (
        DeletionRequest.objects.select_for_update(of=("self",)).select_related("endpoint").get(pk=request.pk)
    )


def _decider(user: Any) -> rules.Decider:
    return rules.Decider(
        int(user.pk),
        has_permission=bool(user.has_perm(rules.APPROVE_PERMISSION)),
        is_superuser=bool(getattr(user, "is_superuser", False)),
    )


def _check(row: DeletionRequest, user: Any, decision: str) -> None:
    refusal = rules.decision_refusal(
        row.status,
        row.requested_by_id,
        _decider(user),
        decision,
        allow_self_approval=bool(get_plugin_config("netbox_hvsync", "allow_self_approval")),
    )
    if refusal is not None:
        raise DecisionRefused(refusal)


def approve(request: DeletionRequest, *, user: Any | None, comment: str = "") -> DeletionRequest:
    """Approve (four eyes) and apply at once. `user=None`: the endpoint's unattended auto-approval."""
    expire_stale()
    with transaction.atomic():
        row = _locked(request)
        if user is None:
            if not getattr(row.endpoint, "auto_approve_deletions", False):
                raise DecisionRefused(
                    Refusal(
                        "forbidden",
                        "an approval without a person needs the endpoint's auto_approve_deletions",
                    )
                )
            if row.status != rules.PENDING:
                raise DecisionRefused(Refusal("conflict", f"the request is already {row.status}"))
            comment = comment or "auto-approved: the endpoint approves deletions unattended"
        else:
            _check(row, user, rules.APPROVED)
        _move(row, rules.APPROVED, decided_by=user, decided_at=timezone.now(), comment=comment)
        who = "the endpoint's auto-approval" if user is None else str(user)
        _journal(
            _target(row), user, "warning", f"Deletion approved by {who} ({_link(row)}). {comment}".strip()
        )
    return apply(row, user=user)


def reject(request: DeletionRequest, *, user: Any, comment: str = "") -> DeletionRequest:
    """Keep the object; the request is closed as `rejected`."""
    expire_stale()
    with transaction.atomic():
        row = _locked(request)
        _check(row, user, rules.REJECTED)
        _move(row, rules.REJECTED, decided_by=user, decided_at=timezone.now(), comment=comment)
        _journal(_target(row), user, "info", f"Deletion rejected by {user} ({_link(row)}). {comment}".strip())
    return row


def _answer_for(request: DeletionRequest, sidecar: Any | None) -> rules.RecheckAnswer | None:
    """Read Proxmox again through the backend: is the object still gone? None: nothing to read."""
    if not request.identity:
        return None
    if sidecar is None or request.endpoint is None or request.endpoint.backend_id is None:
        return "unknown"
    from netbox_hvsync.backend.resolution import resolve_backend
    from netbox_hvsync.rules.transport import TransportError, call

    vmid = getattr(sidecar, "vmid", None)
    node = getattr(sidecar, "node_name", "") or ""
    if vmid is not None:
        path = f"/hv/guests/{int(vmid)}"
    elif node and isinstance(sidecar, sidecar_models.SyncedDevice | sidecar_models.SyncedInterface):
        path = "/hv/nodes/"
    else:
        return "unknown"  # VLANs, prefixes, node-level IPs: no read answers for them alone
    resolved = resolve_backend()
    if resolved is None:
        return "unknown"
    query = urlencode({"hv_endpoint_ids": str(request.endpoint.backend_id)})
    try:
        answer = call(
            resolved.transport,
            "GET",
            resolved.context.url(path) + "?" + query,
            headers=resolved.context.auth_headers(),
            timeout=RECHECK_TIMEOUT,
        )
    except TransportError as exc:
        logger.warning(
            "deletion request %s: the re-check could not reach the backend (%s)", request.pk, exc.kind
        )
        return "unknown"
    if answer.status != 200:
        return "unknown"
    backend_id = int(request.endpoint.backend_id)
    if vmid is not None:
        key = None
        if isinstance(sidecar, sidecar_models.SyncedVirtualDisk | sidecar_models.SyncedInterface):
            key = sidecar.key
        return rules.guest_presence(answer.body, backend_id, key)
    return rules.node_presence(answer.body, backend_id, node)


def _cascade(obj: Any) -> dict[str, list[dict[str, Any]]]:
    """What deleting `obj` takes with it (Django's own collector): per model label, id and display."""
    collector = Collector(using=router.db_for_write(type(obj)))
    collector.collect([obj])
    found: dict[str, list[dict[str, Any]]] = {}
    rows: Iterable[tuple[Any, Iterable[Any]]] = collector.data.items()
    for model, instances in rows:
        label = f"{model._meta.app_label}.{model._meta.model_name}"
        for instance in instances:
            if instance is obj:
                continue
            found.setdefault(label, []).append({"id": instance.pk, "display": str(instance)})
    for queryset in collector.fast_deletes:
        label = f"{queryset.model._meta.app_label}.{queryset.model._meta.model_name}"
        found.setdefault(label, []).extend({"id": o.pk, "display": str(o)} for o in queryset)
    return {label: sorted(items, key=lambda i: i["id"]) for label, items in sorted(found.items())}


def apply(request: DeletionRequest, *, user: Any | None) -> DeletionRequest:
    """Delete the object of an approved request, after re-checking it is still gone and still the same.

    Back in Proxmox -> `withdrawn`; another identity, an unanswered read or a refused deletion -> `failed`
    with the reason (no secrets: messages name objects, never credentials); else `applied` with a record
    of what was deleted."""
    with transaction.atomic():
        row = _locked(request)
        if row.status != rules.APPROVED:
            raise DecisionRefused(
                Refusal("conflict", f"the request is {row.status}; only an approved request is applied")
            )
        obj = _target(row)
        if obj is None:
            return _move(row, rules.FAILED, error="the object no longer exists in NetBox")
        sidecar = sidecar_of(obj)
        current = identity_of(sidecar) if sidecar is not None else None
        same = not row.identity or current == row.identity
        verdict = rules.apply_verdict(row.identity, current, _answer_for(row, sidecar) if same else None)
        if verdict.outcome == "withdraw":
            _move(row, rules.WITHDRAWN, comment=f"{row.comment}\n{verdict.reason}".strip())
            _journal(obj, user, "info", f"Deletion request withdrawn ({_link(row)}): {verdict.reason}")
            return row
        if verdict.outcome == "fail":
            _move(row, rules.FAILED, error=verdict.reason)
            _journal(obj, user, "danger", f"Deletion failed ({_link(row)}): {verdict.reason}")
            return row
        deleted = {
            "object": {
                "type": _label(obj),
                "id": obj.pk,
                "display": str(obj),
                "data": serialize_object(obj),
            },
            "cascaded": _cascade(obj),
        }
        try:
            with transaction.atomic():
                obj.snapshot()
                obj.delete()
        except (ProtectedError, RestrictedError, AbortRequest) as exc:
            reason = f"NetBox refused the deletion: {exc.args[0] if exc.args else type(exc).__name__}"
            _move(row, rules.FAILED, error=str(reason)[:2000])
            _journal(obj, user, "danger", f"Deletion failed ({_link(row)}): {reason}")
            return row
        return _move(row, rules.APPLIED, applied_at=timezone.now(), deleted_data=deleted)
