"""Records of decisions and actions: four-eyes deletion requests and plan-then-apply jobs."""

from __future__ import annotations

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse
from netbox.models import NetBoxModel
from netbox.plugins import get_plugin_config

from netbox_hvsync.choices import ApplyJobStatusChoices, DeletionRequestStatusChoices
from netbox_hvsync.rules.deletions import (
    APPROVED_STATUSES,
    DECIDED_BY_A_PERSON,
    OPEN_STATUSES,
    REQUEST_FIELDS,
    edit_refusal,
)

__all__ = ("ApplyJob", "DeletionRequest")


class DeletionRequest(NetBoxModel):
    """A request to delete a NetBox object that is gone from Proxmox; a second person must approve it.

    The lifecycle (pending -> approved -> applied | failed; pending -> rejected | withdrawn | expired) and
    who may decide live in `rules.deletions`; the actions that move a request live in `deletions`."""

    endpoint = models.ForeignKey(
        "netbox_hvsync.HvEndpoint", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    object_type = models.ForeignKey(ContentType, on_delete=models.PROTECT, related_name="+")
    object_id = models.PositiveBigIntegerField()
    object_repr = models.CharField(max_length=200, help_text="The object's display name when requested")
    identity = models.CharField(
        max_length=200,
        blank=True,
        help_text="The object's hvsync identity (its sync-state record) when requested; applying checks it",
    )
    run_id = models.CharField(max_length=64, blank=True, help_text="run_id of the sync that raised it")
    job = models.ForeignKey("core.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    reason = models.TextField(blank=True)
    gone_since = models.DateTimeField(null=True, blank=True, help_text="Since when Proxmox no longer has it")
    status = models.CharField(
        max_length=20, choices=DeletionRequestStatusChoices, default=DeletionRequestStatusChoices.PENDING
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True, help_text="The decider's comment")
    applied_at = models.DateTimeField(null=True, blank=True)
    deleted_data = models.JSONField(
        default=dict,
        blank=True,
        help_text="What applying deleted: the object's serialised data and what cascaded with it",
    )
    error = models.TextField(blank=True, help_text="Why applying failed")

    class Meta:
        ordering = ("-created", "pk")
        verbose_name = "deletion request"
        permissions = [("approve_deletionrequest", "Can approve or reject deletion requests")]
        constraints = [
            models.UniqueConstraint(
                fields=("object_type", "object_id"),
                condition=models.Q(status__in=OPEN_STATUSES),
                name="hvsync_deletionrequest_one_open_per_object",
                violation_error_message="This object already has an open (pending or approved) deletion request.",
            )
        ]

    def __str__(self) -> str:
        return f"Delete {self.object_repr}"

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:deletionrequest", args=[self.pk])

    def get_status_color(self) -> str:
        return DeletionRequestStatusChoices.colors.get(self.status)

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES

    def clean(self) -> None:
        super().clean()
        if self.status in DECIDED_BY_A_PERSON and not self.decided_by_id:
            raise ValidationError({"decided_by": "A decided request names who decided it."})
        if self.status in APPROVED_STATUSES and self._approved_by_its_requester():
            raise ValidationError(
                {"decided_by": "four eyes: the approver must be a different person than the requester."}
            )
        self._refuse_edits_after_the_decision()

    def _approved_by_its_requester(self) -> bool:
        """Backstop of the four-eyes rule (`rules.deletions.decision_refusal` decides it first)."""
        if not self.decided_by_id or self.decided_by_id != self.requested_by_id:
            return False
        return not (
            self.decided_by.is_superuser and get_plugin_config("netbox_hvsync", "allow_self_approval")
        )

    def _refuse_edits_after_the_decision(self) -> None:
        if self.pk is None:
            return
        stored = type(self).objects.filter(pk=self.pk).values("status", *REQUEST_FIELDS).first()
        if stored is None:
            return
        changed = [name.removesuffix("_id") for name in REQUEST_FIELDS if stored[name] != getattr(self, name)]
        refusal = edit_refusal(stored["status"], changed)
        if refusal:
            raise ValidationError(refusal)


class ApplyJob(NetBoxModel):
    """Audit record of one plan-then-apply cycle of the intent path; written only by the backend."""

    endpoint = models.ForeignKey(
        "netbox_hvsync.HvEndpoint",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="apply_jobs",
    )
    status = models.CharField(
        max_length=20, choices=ApplyJobStatusChoices, default=ApplyJobStatusChoices.PLANNED
    )
    plan = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ("-created", "pk")
        verbose_name = "apply job"

    def __str__(self) -> str:
        return f"Apply job {self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:applyjob", args=[self.pk])

    def get_status_color(self) -> str:
        return ApplyJobStatusChoices.colors.get(self.status)
