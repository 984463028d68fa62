"""UI forms: edit, bulk edit and list filters, the NetBox way. Secrets are write-only password inputs."""

from __future__ import annotations

from typing import Any

from dcim.models import Device, Site
from django import forms
from django.contrib.contenttypes.models import ContentType
from ipam.models import IPAddress
from netbox.forms import NetBoxModelBulkEditForm, NetBoxModelFilterSetForm, NetBoxModelForm
from tenancy.models import Tenant
from utilities.forms import BOOLEAN_WITH_BLANK_CHOICES
from utilities.forms.fields import (
    CommentField,
    DynamicModelChoiceField,
    DynamicModelMultipleChoiceField,
    TagFilterField,
)
from utilities.forms.rendering import FieldSet
from virtualization.models import Cluster, VirtualMachine

from netbox_hvsync import models
from netbox_hvsync.choices import (
    AccessMethodChoices,
    ApplyJobStatusChoices,
    DeletionRequestStatusChoices,
    KeyStateChoices,
    SyncedStatusChoices,
)

KEEP_STORED = "Leave blank to keep the stored value."


def _secret(label: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=KEEP_STORED,
    )


def _optional(model: type, label: str | None = None, **kwargs: Any) -> DynamicModelChoiceField:
    return DynamicModelChoiceField(queryset=model.objects.all(), required=False, label=label, **kwargs)


class SecretsFormMixin:
    """Assigns non-blank secrets through the model's encrypting properties; blank keeps what is stored."""

    secret_fields: tuple[str, ...] = ()

    def _post_clean(self) -> None:
        for name in self.secret_fields:
            if value := self.cleaned_data.get(name):  # type: ignore[attr-defined]
                setattr(self.instance, name, value)  # type: ignore[attr-defined]
        super()._post_clean()  # type: ignore[misc]


#
# Connection records
#


class BackendEndpointForm(SecretsFormMixin, NetBoxModelForm):
    secret_fields = ("token",)
    ip_address = _optional(IPAddress, "IP address")
    token = _secret("API key")
    comments = CommentField()

    fieldsets = (
        FieldSet("name", "enabled", name="Backend"),
        FieldSet("url", "ip_address", "port", "verify_ssl", name="Connection"),
        FieldSet("token", name="Key"),  # key_state and key_fingerprint are the server's (SPEC 5.2)
        FieldSet("tags", name="Tags"),
    )

    class Meta:
        model = models.BackendEndpoint
        fields = (
            "name",
            "enabled",
            "url",
            "ip_address",
            "port",
            "verify_ssl",
            "comments",
            "tags",
        )


class InventoryEndpointForm(SecretsFormMixin, NetBoxModelForm):
    secret_fields = ("token",)
    ip_address = _optional(IPAddress, "IP address")
    token = _secret("API token")
    comments = CommentField()

    fieldsets = (
        FieldSet("name", "enabled", name="NetBox as the backend sees it"),
        FieldSet("ip_address", "domain", "port", "verify_ssl", name="Connection"),
        FieldSet("token_version", "token_key", "token", name="API token"),
        FieldSet("tags", name="Tags"),
    )

    class Meta:
        model = models.InventoryEndpoint
        fields = (
            "name",
            "enabled",
            "ip_address",
            "domain",
            "port",
            "verify_ssl",
            "token_version",
            "token_key",
            "comments",
            "tags",
        )


class HvEndpointForm(SecretsFormMixin, NetBoxModelForm):
    secret_fields = ("token_value", "password")
    ip_address = _optional(IPAddress, "IP address")
    site = _optional(Site)
    tenant = _optional(Tenant)
    access_methods = forms.MultipleChoiceField(
        choices=AccessMethodChoices, widget=forms.CheckboxSelectMultiple, initial=[AccessMethodChoices.TOKEN]
    )
    token_value = _secret("Token secret")
    password = _secret("Password")
    comments = CommentField()

    fieldsets = (
        FieldSet("name", "enabled", "site", "tenant", name="Proxmox endpoint"),
        FieldSet(
            "ip_address",
            "domain",
            "port",
            "verify_ssl",
            "timeout",
            "max_retries",
            "retry_backoff",
            name="Connection",
        ),
        FieldSet("username", "access_methods", "token_name", "token_value", "password", name="Credentials"),
        FieldSet("sync_mode_vm", "sync_mode_vm_template", name="Sync modes"),
        FieldSet("allow_template_builds", name="Grants"),
        FieldSet("tags", name="Tags"),
    )

    class Meta:
        model = models.HvEndpoint
        fields = (
            "name",
            "enabled",
            "site",
            "tenant",
            "ip_address",
            "domain",
            "port",
            "verify_ssl",
            "timeout",
            "max_retries",
            "retry_backoff",
            "username",
            "access_methods",
            "token_name",
            "sync_mode_vm",
            "sync_mode_vm_template",
            "allow_template_builds",
            "comments",
            "tags",
        )


#
# Synced data
#


class HvClusterForm(NetBoxModelForm):
    endpoint = DynamicModelChoiceField(queryset=models.HvEndpoint.objects.all())
    cluster = _optional(Cluster, "NetBox cluster")

    class Meta:
        model = models.HvCluster
        fields = ("endpoint", "name", "cluster", "tags")


class HvNodeForm(NetBoxModelForm):
    cluster = DynamicModelChoiceField(queryset=models.HvCluster.objects.all())
    device = _optional(Device)

    class Meta:
        model = models.HvNode
        fields = ("cluster", "name", "node_id", "online", "device", "tags")


class HvStorageForm(NetBoxModelForm):
    cluster = DynamicModelChoiceField(queryset=models.HvCluster.objects.all())
    nodes = DynamicModelMultipleChoiceField(
        queryset=models.HvNode.objects.all(), required=False, query_params={"cluster_id": "$cluster"}
    )

    class Meta:
        model = models.HvStorage
        fields = (
            "cluster",
            "name",
            "storage_type",
            "content",
            "shared",
            "active",
            "enabled",
            "total",
            "used",
            "avail",
            "nodes",
            "tags",
        )


class HvBackupForm(NetBoxModelForm):
    storage = DynamicModelChoiceField(queryset=models.HvStorage.objects.all())
    virtual_machine = _optional(VirtualMachine, "Virtual machine")

    class Meta:
        model = models.HvBackup
        fields = (
            "storage",
            "volid",
            "vmid",
            "virtual_machine",
            "ctime",
            "size",
            "format",
            "notes",
            "protected",
            "verification_state",
            "tags",
        )


class HvSnapshotForm(NetBoxModelForm):
    virtual_machine = DynamicModelChoiceField(queryset=VirtualMachine.objects.all())

    class Meta:
        model = models.HvSnapshot
        fields = ("virtual_machine", "name", "parent", "snaptime", "vmstate", "description", "tags")


class HvTaskHistoryForm(NetBoxModelForm):
    endpoint = DynamicModelChoiceField(queryset=models.HvEndpoint.objects.all())
    node = _optional(models.HvNode, query_params={"endpoint_id": "$endpoint"})
    virtual_machine = _optional(VirtualMachine, "Virtual machine")

    class Meta:
        model = models.HvTaskHistory
        fields = (
            "endpoint",
            "node",
            "upid",
            "task_type",
            "vmid",
            "virtual_machine",
            "user",
            "status",
            "starttime",
            "endtime",
            "tags",
        )


class BackupRoutineForm(NetBoxModelForm):
    endpoint = DynamicModelChoiceField(queryset=models.HvEndpoint.objects.all())
    node = _optional(models.HvNode, query_params={"endpoint_id": "$endpoint"})
    storage = _optional(models.HvStorage, query_params={"endpoint_id": "$endpoint"})
    fleecing_storage = _optional(
        models.HvStorage, "Fleecing storage", query_params={"endpoint_id": "$endpoint"}
    )

    fieldsets = (
        FieldSet(
            "endpoint",
            "job_id",
            "enabled",
            "status",
            "schedule",
            "next_run",
            "node",
            "storage",
            "selection",
            "comment",
            name="Backup job",
        ),
        FieldSet(
            "keep_last",
            "keep_daily",
            "keep_weekly",
            "keep_monthly",
            "keep_yearly",
            "keep_all",
            name="Retention",
        ),
        FieldSet(
            "notes_template",
            "bwlimit",
            "zstd",
            "io_workers",
            "fleecing",
            "fleecing_storage",
            "repeat_missed",
            "pbs_change_detection_mode",
            "raw_config",
            name="Options",
        ),
        FieldSet("tags", name="Tags"),
    )

    class Meta:
        model = models.BackupRoutine
        fields = (
            "endpoint",
            "job_id",
            "enabled",
            "status",
            "schedule",
            "next_run",
            "node",
            "storage",
            "selection",
            "comment",
            "keep_last",
            "keep_daily",
            "keep_weekly",
            "keep_monthly",
            "keep_yearly",
            "keep_all",
            "notes_template",
            "bwlimit",
            "zstd",
            "io_workers",
            "fleecing",
            "fleecing_storage",
            "repeat_missed",
            "pbs_change_detection_mode",
            "raw_config",
            "tags",
        )


class ReplicationForm(NetBoxModelForm):
    endpoint = _optional(models.HvEndpoint, "Proxmox endpoint")
    virtual_machine = DynamicModelChoiceField(queryset=VirtualMachine.objects.all())
    hv_node = _optional(models.HvNode, "Source node", query_params={"endpoint_id": "$endpoint"})

    class Meta:
        model = models.Replication
        fields = (*models.Replication.spec_fields, "tags")


class DeletionRequestForm(NetBoxModelForm):
    """Asking for a deletion; the requester is the logged-in user, the decision is a separate step."""

    endpoint = _optional(models.HvEndpoint, "Proxmox endpoint")
    object_type = forms.ModelChoiceField(
        queryset=ContentType.objects.filter(app_label__in=("virtualization", "dcim", "ipam", "netbox_hvsync"))
    )

    class Meta:
        model = models.DeletionRequest
        fields = ("endpoint", "object_type", "object_id", "object_repr", "reason", "tags")


#
# Bulk edit
#


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
    site = _optional(Site)
    tenant = _optional(Tenant)
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


#
# List filters
#


def filter_form(model_class: type, *extra: str, **fields: forms.Field) -> type:
    """A filter form with search, tags and the given fields, in one set."""
    attrs: dict[str, Any] = {
        "model": model_class,
        "tag": TagFilterField(model_class),
        "fieldsets": (FieldSet("q", "filter_id", "tag"), FieldSet(*fields.keys(), *extra, name="Attributes")),
        **fields,
    }
    return type(f"{model_class.__name__}FilterForm", (NetBoxModelFilterSetForm,), attrs)


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
    allow_template_builds=_bool("Template builds allowed"),
)
HvClusterFilterForm = filter_form(models.HvCluster, endpoint_id=_endpoint_filter())
HvNodeFilterForm = filter_form(models.HvNode, online=_bool())
HvStorageFilterForm = filter_form(models.HvStorage, shared=_bool(), active=_bool())
HvBackupFilterForm = filter_form(models.HvBackup, protected=_bool())
HvSnapshotFilterForm = filter_form(models.HvSnapshot, vmstate=_bool("With RAM state"))
HvTaskHistoryFilterForm = filter_form(models.HvTaskHistory, endpoint_id=_endpoint_filter())
BackupRoutineFilterForm = filter_form(
    models.BackupRoutine,
    endpoint_id=_endpoint_filter(),
    enabled=_bool(),
    status=forms.MultipleChoiceField(choices=SyncedStatusChoices, required=False),
)
ReplicationFilterForm = filter_form(
    models.Replication,
    endpoint_id=_endpoint_filter(),
    disable=_bool("Disabled"),
    status=forms.MultipleChoiceField(choices=SyncedStatusChoices, required=False),
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
