"""Every signal receiver of the plugin (declared signals would live in `signals.py`; it has none).

Post-save hooks (SPEC 6.5, 4.5): the plugin's records reach the backend when they are saved.

- inventory endpoint: pushed to the singleton backend after the transaction commits;
- hv endpoint: pushed after commit from a fresh read of the row (never the in-memory instance);
- hv endpoint deleted: its backend row is recorded for retirement in the delete's transaction and retired
  after commit (C3: disabled, credentials wiped); a failure is retried by the next preflight or push;
- backend endpoint: key adoption around the save (backend/adoption.py); it never bootstraps before commit.
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

from netbox_hvsync.backend import adoption, push
from netbox_hvsync.models import BackendEndpoint, HvEndpoint, InventoryEndpoint

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
