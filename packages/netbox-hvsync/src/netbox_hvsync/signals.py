"""Model signal handlers. The push hooks (SPEC 6.5) arrive with the push issue; here: the deletion guard."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import pre_delete
from django.dispatch import receiver

from netbox_hvsync.models import HvEndpoint


@receiver(pre_delete, sender=HvEndpoint, dispatch_uid="hvsync_hvendpoint_deletion_guard")
def refuse_deleting_granted_endpoint(sender: type, instance: HvEndpoint, **kwargs: Any) -> None:
    """Backstop for deletions that bypass Model.delete() (e.g. a cascade from elsewhere)."""
    instance.check_deletable()
