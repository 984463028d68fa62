"""Bulk edit forms: what may change on many rows at once (never a secret)."""

from __future__ import annotations

from dcim.models import Site
from django import forms
from netbox.forms import NetBoxModelBulkEditForm
from tenancy.models import Tenant
from utilities.forms import BOOLEAN_WITH_BLANK_CHOICES

from netbox_hvsync import models
from netbox_hvsync.choices import SyncedStatusChoices

from .fields import optional_field


class HvEndpointBulkEditForm(NetBoxModelBulkEditForm):
    model = models.HvEndpoint
    enabled = forms.NullBooleanField(required=False, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES))
    allow_template_builds = forms.NullBooleanField(
        required=False, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES)
    )
    sync_mode_vm = forms.NullBooleanField(
        required=False, label="Sync virtual machines", widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES)
    )
    sync_mode_vm_template = forms.NullBooleanField(
        required=False, label="Sync templates", widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES)
    )
    verify_ssl = forms.NullBooleanField(
        required=False, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES)
    )
    timeout = forms.IntegerField(required=False, min_value=1)
    site = optional_field(Site)
    tenant = optional_field(Tenant)
    nullable_fields = ("site", "tenant")


class EnabledBulkEditForm(NetBoxModelBulkEditForm):
    enabled = forms.NullBooleanField(required=False, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES))
    verify_ssl = forms.NullBooleanField(
        required=False, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES)
    )


class BackendEndpointBulkEditForm(EnabledBulkEditForm):
    model = models.BackendEndpoint


class InventoryEndpointBulkEditForm(EnabledBulkEditForm):
    model = models.InventoryEndpoint


class StatusBulkEditForm(NetBoxModelBulkEditForm):
    status = forms.ChoiceField(choices=[("", "---------"), *SyncedStatusChoices], required=False)


class BackupRoutineBulkEditForm(StatusBulkEditForm):
    model = models.BackupRoutine
    enabled = forms.NullBooleanField(required=False, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES))


class ReplicationBulkEditForm(StatusBulkEditForm):
    model = models.Replication
    disable = forms.NullBooleanField(required=False, widget=forms.Select(choices=BOOLEAN_WITH_BLANK_CHOICES))


def simple_bulk_edit_form(model_class: type) -> type:
    """Tags and custom fields only, for synced records."""
    return type(f"{model_class.__name__}BulkEditForm", (NetBoxModelBulkEditForm,), {"model": model_class})


__all__ = [
    "BackendEndpointBulkEditForm",
    "BackupRoutineBulkEditForm",
    "EnabledBulkEditForm",
    "HvEndpointBulkEditForm",
    "InventoryEndpointBulkEditForm",
    "ReplicationBulkEditForm",
    "StatusBulkEditForm",
    "simple_bulk_edit_form",
]
