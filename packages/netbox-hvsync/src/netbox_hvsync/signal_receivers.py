"""Every signal receiver of the plugin (declared signals would live in `signals.py`; it has none).

Post-save hooks (SPEC 6.5, 4.5): the plugin's records reach the backend when they are saved.

- inventory endpoint: pushed to the singleton backend after the transaction commits;
- hv endpoint: pushed after commit from a fresh read of the row (never the in-memory instance);
- hv endpoint deleted: its backend row is recorded for retirement in the delete's transaction and retired
  after commit (C3: disabled, credentials wiped); a failure is retried by the next preflight or push;
- backend endpoint: key adoption around the save (backend/adoption.py); it never bootstraps before commit;
- IPAM IP address linked by an endpoint (issue 39): changing its address re-targets the endpoint, so only
  a user who may change every endpoint linking it may change it (a user who may edit IP addresses but not
  endpoints cannot redirect credentials), the new address obeys the endpoint host rules, and after commit
  the endpoint is re-targeted properly: a backend endpoint reached by that IP is adopted again before its
  key is used there, a Proxmox or inventory endpoint is pushed with its secret (C2).
  The plugin keeps no long-lived backend clients (each job or push builds its own transport), so there
  are no stale clients for a backend endpoint save to stop.

A push failure never breaks the save: it is logged (redacted by the rules) and the next sync's preflight
pushes again.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver
from ipam.models import IPAddress
from netaddr import AddrFormatError, IPNetwork
from netbox.context import current_request
from utilities.exceptions import AbortRequest

from netbox_hvsync.backend import adoption, push
from netbox_hvsync.models import BackendEndpoint, HvEndpoint, InventoryEndpoint
from netbox_hvsync.rules.urls import TargetError, check_endpoint_host

logger = logging.getLogger("netbox_hvsync.signal_receivers")


def _push_safely(what: str, push: Any, pk: int) -> None:
    try:
        result = push(pk)
    except Exception as exc:  # a push must never break the request that saved the row
        logger.error("%s %s: push raised %s", what, pk, type(exc).__name__)
        return
    if result is not None and not result.ok:
        logger.warning("%s %s: push failed (%s): %s", what, pk, result.status, result.error)


@receiver(post_save, sender=InventoryEndpoint, dispatch_uid="hvsync_push_inventory_endpoint")
def push_inventory_endpoint_on_save(sender: type, instance: InventoryEndpoint, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return
    pk = instance.pk
    transaction.on_commit(lambda: _push_safely("inventory endpoint", push.push_inventory_by_pk, pk))


@receiver(post_save, sender=HvEndpoint, dispatch_uid="hvsync_push_hv_endpoint")
def push_hv_endpoint_on_save(sender: type, instance: HvEndpoint, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return
    pk = instance.pk
    transaction.on_commit(lambda: _push_safely("hv endpoint", push.push_hv_by_pk, pk))


@receiver(pre_save, sender=BackendEndpoint, dispatch_uid="hvsync_backend_key_adoption_pre")
def adopt_backend_key_before_save(sender: type, instance: BackendEndpoint, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return
    adoption.before_save(instance)


@receiver(post_save, sender=BackendEndpoint, dispatch_uid="hvsync_backend_key_adoption_post")
def configure_backend_key_after_commit(sender: type, instance: BackendEndpoint, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return
    adoption.after_save(instance)


@receiver(pre_delete, sender=HvEndpoint, dispatch_uid="hvsync_hvendpoint_deletion_guard")
def refuse_deleting_granted_endpoint(sender: type, instance: HvEndpoint, **kwargs: Any) -> None:
    """Backstop for deletions that bypass Model.delete() (e.g. a cascade from elsewhere): an endpoint
    whose template-build grant is not confirmed revoked cannot be deleted (SPEC 2.6)."""
    instance.check_deletable()


@receiver(post_delete, sender=HvEndpoint, dispatch_uid="hvsync_retire_deleted_hv_endpoint")
def retire_deleted_hv_endpoint(sender: type, instance: HvEndpoint, **kwargs: Any) -> None:
    """C3: the deleted endpoint's backend row must stop syncing and forget its credentials."""
    push.record_retirement(instance)
    pk = instance.pk
    transaction.on_commit(lambda: _push_safely("deleted hv endpoint", push.retire_by_pk, pk))


LINKING_MODELS = (BackendEndpoint, InventoryEndpoint, HvEndpoint)


def _linking(ip_pk: int) -> list[Any]:
    return [
        obj for model in LINKING_MODELS for obj in model.objects.filter(ip_address_id=ip_pk).order_by("pk")
    ]


@receiver(pre_save, sender=IPAddress, dispatch_uid="hvsync_guard_endpoint_ip_change")
def guard_endpoint_ip_change(sender: type, instance: IPAddress, **kwargs: Any) -> None:
    """A changed address of an IP an endpoint links to moves that endpoint: refused for a user who may not
    change the endpoint, and for an address the endpoint host rules refuse (the field is `address`)."""
    if kwargs.get("raw") or instance.pk is None or instance.address is None:
        return
    stored = IPAddress.objects.filter(pk=instance.pk).values_list("address", flat=True).first()
    try:
        new_ip = IPNetwork(str(instance.address)).ip
    except (AddrFormatError, ValueError, TypeError):
        return  # NetBox's own validation refuses it
    if stored is None or IPNetwork(str(stored)).ip == new_ip:
        return
    linked = _linking(instance.pk)
    if not linked:
        return
    names = ", ".join(f"{obj._meta.verbose_name} {obj.name!r}" for obj in linked)
    try:
        check_endpoint_host(str(new_ip), "address")
    except TargetError as exc:
        raise AbortRequest(f"address: {exc.message} (this IP address is the target of {names})") from None
    request = current_request.get()
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        for obj in linked:
            if not user.has_perm(f"netbox_hvsync.change_{obj._meta.model_name}", obj):
                raise AbortRequest(
                    f"address: this IP address is the target of {obj._meta.verbose_name} {obj.name!r}; "
                    "changing it re-targets that endpoint, so it needs permission to change the endpoint"
                )
    instance._hvsync_retarget = [(type(obj), obj.pk) for obj in linked]  # type: ignore[attr-defined]


@receiver(post_save, sender=IPAddress, dispatch_uid="hvsync_retarget_linked_endpoints")
def retarget_linked_endpoints(sender: type, instance: IPAddress, **kwargs: Any) -> None:
    linked = getattr(instance, "_hvsync_retarget", None)
    if kwargs.get("raw") or not linked:
        return
    instance._hvsync_retarget = None  # type: ignore[attr-defined]
    for model, pk in linked:
        if model is BackendEndpoint:
            adoption.retarget_by_ip(pk)
        elif model is InventoryEndpoint:
            transaction.on_commit(
                lambda pk=pk: _push_safely("inventory endpoint", push.push_inventory_by_pk, pk)
            )
        else:
            transaction.on_commit(lambda pk=pk: _push_safely("hv endpoint", push.push_hv_by_pk, pk))
