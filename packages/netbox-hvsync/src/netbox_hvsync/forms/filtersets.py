"""List filter forms: search, tags and each model's own attributes."""

from __future__ import annotations

from typing import Any

from django import forms
from netbox.forms import NetBoxModelFilterSetForm
from utilities.forms import BOOLEAN_WITH_BLANK_CHOICES
from utilities.forms.fields import DynamicModelMultipleChoiceField, TagFilterField
from utilities.forms.rendering import FieldSet

from netbox_hvsync import models
from netbox_hvsync.choices import (
    ApplyJobStatusChoices,
    DeletionRequestStatusChoices,
    KeyStateChoices,
    SyncedStatusChoices,
)


def filter_form(model_class: type, *extra: str, **fields: forms.Field) -> type:
    """A filter form with search, tags and the given fields, in one set."""
    attrs: dict[str, Any] = {
        "model": model_class,
        "tag": TagFilterField(model_class),
        "fieldsets": (FieldSet("q", "filter_id", "tag"), FieldSet(*fields.keys(), *extra, name="Attributes")),
        **fields,
    }
    return type(f"{model_class.__name__}FilterForm", (NetBoxModelFilterSetForm,), attrs)


GONE = "Gone from Proxmox"


def _bool(label: str | None = None) -> forms.NullBooleanField:
    return forms.NullBooleanField(
        required=False, label=label, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES)
    )


def _endpoint_filter() -> DynamicModelMultipleChoiceField:
    return DynamicModelMultipleChoiceField(
        queryset=models.HvEndpoint.objects.all(), required=False, label="Proxmox endpoint"
    )


BackendEndpointFilterForm = filter_form(
    models.BackendEndpoint,
    enabled=_bool(),
    key_state=forms.MultipleChoiceField(choices=KeyStateChoices, required=False),
)
InventoryEndpointFilterForm = filter_form(models.InventoryEndpoint, enabled=_bool())
HvEndpointFilterForm = filter_form(
    models.HvEndpoint,
    enabled=_bool(),
    sync_mode_vm=_bool("Sync virtual machines"),
    sync_mode_vm_template=_bool("Sync templates"),
    auto_approve_deletions=_bool("Auto-approve deletions"),
    allow_template_builds=_bool("Template builds allowed"),
)
HvClusterFilterForm = filter_form(models.HvCluster, endpoint_id=_endpoint_filter())
HvNodeFilterForm = filter_form(models.HvNode, online=_bool())
HvStorageFilterForm = filter_form(models.HvStorage, shared=_bool(), active=_bool(), gone=_bool(GONE))
HvBackupFilterForm = filter_form(models.HvBackup, protected=_bool(), gone=_bool(GONE))
HvSnapshotFilterForm = filter_form(models.HvSnapshot, vmstate=_bool("With RAM state"), gone=_bool(GONE))
HvTaskHistoryFilterForm = filter_form(models.HvTaskHistory, endpoint_id=_endpoint_filter())
BackupRoutineFilterForm = filter_form(
    models.BackupRoutine,
    endpoint_id=_endpoint_filter(),
    enabled=_bool(),
    status=forms.MultipleChoiceField(choices=SyncedStatusChoices, required=False),
    gone=_bool(GONE),
)
ReplicationFilterForm = filter_form(
    models.Replication,
    endpoint_id=_endpoint_filter(),
    disable=_bool("Disabled"),
    status=forms.MultipleChoiceField(choices=SyncedStatusChoices, required=False),
    gone=_bool(GONE),
)
DeletionRequestFilterForm = filter_form(
    models.DeletionRequest,
    status=forms.MultipleChoiceField(choices=DeletionRequestStatusChoices, required=False),
)
ApplyJobFilterForm = filter_form(
    models.ApplyJob,
    endpoint_id=_endpoint_filter(),
    status=forms.MultipleChoiceField(choices=ApplyJobStatusChoices, required=False),
)


__all__ = [
    "ApplyJobFilterForm",
    "BackendEndpointFilterForm",
    "BackupRoutineFilterForm",
    "DeletionRequestFilterForm",
    "HvBackupFilterForm",
    "HvClusterFilterForm",
    "HvEndpointFilterForm",
    "HvNodeFilterForm",
    "HvSnapshotFilterForm",
    "HvStorageFilterForm",
    "HvTaskHistoryFilterForm",
    "InventoryEndpointFilterForm",
    "ReplicationFilterForm",
    "filter_form",
]
