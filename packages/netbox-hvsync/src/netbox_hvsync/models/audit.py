"""Records of decisions and actions: four-eyes deletion requests and plan-then-apply jobs."""

from __future__ import annotations

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse
from netbox.models import NetBoxModel

from netbox_hvsync.choices import ApplyJobStatusChoices, DeletionRequestStatusChoices
from netbox_hvsync.rules.deletion import REQUEST_FIELDS, edit_refusal

__all__ = ("ApplyJob", "DeletionRequest")


class DeletionRequest(NetBoxModel):
    """A request to delete an object in Proxmox; a second person must approve it (four eyes)."""

    endpoint = models.ForeignKey(
        "netbox_hvsync.HvEndpoint", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    object_type = models.ForeignKey(ContentType, on_delete=models.PROTECT, related_name="+")
    object_id = models.PositiveBigIntegerField()
    object_repr = models.CharField(max_length=200)
    reason = models.TextField(blank=True)
    status = models.CharField(
        max_length=20, choices=DeletionRequestStatusChoices, default=DeletionRequestStatusChoices.PENDING
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created", "pk")
        verbose_name = "deletion request"

    def __str__(self) -> str:
        return f"Delete {self.object_repr}"

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:deletionrequest", args=[self.pk])

    def get_status_color(self) -> str:
        return DeletionRequestStatusChoices.colors.get(self.status)

    def clean(self) -> None:
        super().clean()
        decided = (DeletionRequestStatusChoices.APPROVED, DeletionRequestStatusChoices.EXECUTED)
        if self.status in decided and not self.approved_by_id:
            raise ValidationError({"approved_by": "An approved request names its approver."})
        if self.approved_by_id and self.approved_by_id == self.requested_by_id:
            raise ValidationError(
                {"approved_by": "The approver must be a different person than the requester."}
            )
        self._refuse_edits_after_the_decision()

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
