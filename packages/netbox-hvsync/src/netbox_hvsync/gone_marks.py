"""The endpoint's gone policy, applied when a sync-state record's `gone_since` changes (issue 40).

The backend marks a managed object gone (null -> a time) or back (a time -> null) on its sidecar, through
NetBox's REST API or the plugin's apply route; both save the sidecar, so a receiver on that save applies the
policy the same way whichever path the backend took, once per transition:

- gone: `status` sets the endpoint's `gone_status` on the object (if it has a status) and remembers the
  previous one on the sidecar; `request-deletion`, or a run with `delete_stale` (`gone_request`), raises
  a deletion request (`deletions.raise_request`) and, where the endpoint auto-approves deletions (the
  unattended mode), approves it with no user, which applies it at once (`deletions.approve`). The sidecar's `last_seen` is frozen at the endpoint's last
  complete read before the run that found it gone.
- back: the status hvsync set is restored (unless someone changed it since), an open request withdrawn.

The decisions are `rules.gone`'s; this module only reads and writes NetBox objects.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models.signals import post_save
from netbox.context import current_request

from netbox_hvsync.models import sidecars
from netbox_hvsync.rules import gone as rules

logger = logging.getLogger("netbox_hvsync.gone")

SIDECAR_MODELS = (
    sidecars.SyncedVirtualMachine,
    sidecars.SyncedDevice,
    sidecars.SyncedInterface,
    sidecars.SyncedVirtualDisk,
    sidecars.SyncedIPAddress,
    sidecars.SyncedVLAN,
    sidecars.SyncedPrefix,
)


def _deletions() -> Any:
    """The deletion-request workflow (`netbox_hvsync.deletions`); None while it is not installed."""
    try:
        from netbox_hvsync import deletions
    except ImportError:  # pragma: no cover - only before the workflow module exists
        logger.warning("netbox_hvsync.deletions is missing: no deletion request raised or withdrawn")
        return None
    return deletions


def _acting_user() -> Any:
    request = current_request.get()
    user = getattr(request, "user", None)
    return user if getattr(user, "is_authenticated", False) else None


def _status_of(obj: Any) -> str | None:
    return str(obj.status) if obj is not None and hasattr(obj, "status") else None


def _set_status(obj: Any, status: str) -> None:
    """Change the object's status the NetBox way (a changelog row), if its model accepts that value."""
    field = obj._meta.get_field("status")
    allowed = {str(value) for value, _ in field.flatchoices}
    if allowed and status not in allowed:
        logger.info("%s %s: status %r is not one of its model's, left as is", obj._meta.label, obj.pk, status)
        return
    if hasattr(obj, "snapshot"):
        obj.snapshot()
    obj.status = status
    obj.save()


def went(sidecar: Any) -> None:
    endpoint = sidecar.endpoint
    obj = sidecar.target
    step = rules.on_gone(
        endpoint.gone_policy, endpoint.gone_status, _status_of(obj), asked=bool(sidecar.gone_request)
    )
    changes: dict[str, Any] = {"last_seen": sidecar.seen_last({})}
    if step.set_status is not None and obj is not None:
        _set_status(obj, step.set_status)
        changes["gone_prior_status"] = step.remember
    type(sidecar).objects.filter(pk=sidecar.pk).update(**changes)  # no second save, no second transition
    if step.request and obj is not None and (deletions := _deletions()) is not None:
        request = deletions.raise_request(
            obj,
            sidecar=sidecar,
            endpoint=endpoint,
            reason="gone from Proxmox" + (" (delete_stale)" if sidecar.gone_request else ""),
            requested_by=_acting_user(),
            run_id=sidecar.last_run_id,
            gone_since=sidecar.gone_since,
        )
        if request is not None and request.status == "pending" and endpoint.auto_approve_deletions:
            try:  # the unattended mode: approved by nobody, applied at once (or withdrawn / failed)
                deletions.approve(request, user=None)
            except deletions.DecisionRefused as exc:
                logger.warning("deletion request %s not applied: %s", request.pk, exc)


def returned(sidecar: Any) -> None:
    endpoint = sidecar.endpoint
    obj = sidecar.target
    step = rules.on_return(endpoint.gone_status, _status_of(obj), sidecar.gone_prior_status)
    if step.set_status is not None and obj is not None:
        _set_status(obj, step.set_status)
    if sidecar.gone_prior_status:
        type(sidecar).objects.filter(pk=sidecar.pk).update(gone_prior_status="")
    if step.withdraw and obj is not None and (deletions := _deletions()) is not None:
        deletions.withdraw_for(obj)


def on_sidecar_saved(sender: type, instance: Any, created: bool, raw: bool = False, **kwargs: Any) -> None:
    """A sidecar saved: apply the policy if its gone mark changed (set on create counts as a change)."""
    if raw:
        return
    before = None if created else getattr(instance, "_loaded_gone_since", None)
    after = instance.gone_since
    instance._loaded_gone_since = after
    if (before is None) == (after is None):
        return
    if after is not None:
        went(instance)
    else:
        returned(instance)


for _model in SIDECAR_MODELS:
    post_save.connect(on_sidecar_saved, sender=_model, dispatch_uid=f"hvsync_gone_{_model._meta.model_name}")
