"""The ledger of applied change sets: what a batch wrote, kept under the id its client chose.

A client whose answer never came (a timeout, a dropped connection) reads the outcome back here, or
sends the same change set again and gets the stored outcome instead of a second write. Rows are a plain
model (no changelog of their own) and are pruned after `RETENTION`.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models

__all__ = ("AppliedChangeSet",)

RETENTION = timedelta(hours=24)


class AppliedChangeSet(models.Model):
    id = models.UUIDField(primary_key=True, help_text="The client's change-set id (the changelog request id)")
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    outcome = models.JSONField(help_text="The answer the change set received: per-operation ids")

    class Meta:
        ordering = ("-created",)
        verbose_name = "applied change set"

    def __str__(self) -> str:
        return str(self.id)
