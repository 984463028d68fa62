"""Edit forms of every model, the NetBox way. Secrets are write-only password inputs."""

from __future__ import annotations

from dcim.models import Device, Site
from django import forms
from django.contrib.contenttypes.models import ContentType
from ipam.models import IPAddress
from netbox.forms import NetBoxModelForm
from tenancy.models import Tenant
from utilities.forms import add_blank_choice
from utilities.forms.fields import CommentField, DynamicModelChoiceField, DynamicModelMultipleChoiceField
from utilities.forms.rendering import FieldSet
from virtualization.choices import VirtualMachineStatusChoices
from virtualization.models import Cluster, VirtualMachine

from netbox_hvsync import models
from netbox_hvsync.choices import AccessMethodChoices, GonePolicyChoices
from netbox_hvsync.wire import PLUGIN_RECORDS

from .fields import optional_field, secret_field
from .mixins import SecretsFormMixin


class BackendEndpointForm(SecretsFormMixin, NetBoxModelForm):
    secret_fields = ("token",)
    ip_address = optional_field(IPAddress, "IP address")
    token = secret_field("API key")
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
    ip_address = optional_field(IPAddress, "IP address")
    token = secret_field("API token")
    comments = CommentField()

    fieldsets = (
        FieldSet("name", "enabled", name="NetBox as the backend sees it"),
        FieldSet("scheme", "ip_address", "domain", "port", "verify_ssl", name="Connection"),
        FieldSet("token_version", "token_key", "token", name="API token"),
        FieldSet("tags", name="Tags"),
    )

    class Meta:
        model = models.InventoryEndpoint
        fields = (
            "name",
            "enabled",
            "scheme",
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
    ip_address = optional_field(IPAddress, "IP address")
    site = optional_field(Site)
    tenant = optional_field(Tenant)
    access_methods = forms.MultipleChoiceField(
        choices=AccessMethodChoices, widget=forms.CheckboxSelectMultiple, initial=[AccessMethodChoices.TOKEN]
    )
    token_value = secret_field("Token secret")
    password = secret_field("Password")
    gone_policy = forms.ChoiceField(
        choices=GonePolicyChoices,
        required=False,
        initial=GonePolicyChoices.KEEP,
        label="Gone policy",
        help_text="What an object gone from Proxmox does to NetBox's own fields (default: keep, mark only)",
    )
    gone_guard_share = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        initial=0.30,
        label="Gone guard share",
        help_text="0-1: a run that would mark more than this share of the endpoint's objects gone marks none",
    )
    gone_status = forms.ChoiceField(
        choices=add_blank_choice(VirtualMachineStatusChoices),
        required=False,
        label="Gone status",
        help_text="The status the 'status' policy sets on an object gone from Proxmox",
    )
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
        FieldSet(
            "gone_policy",
            "gone_status",
            "gone_guard_share",
            "auto_approve_deletions",
            name="Gone from Proxmox",
        ),
        FieldSet("allow_template_builds", name="Grants"),
        FieldSet("tags", name="Tags"),
    )

    def clean_gone_policy(self) -> str:
        return self.cleaned_data.get("gone_policy") or GonePolicyChoices.KEEP

    def clean_gone_guard_share(self) -> float:
        share = self.cleaned_data.get("gone_guard_share")
        return 0.30 if share is None else share

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
            "gone_policy",
            "gone_status",
            "gone_guard_share",
            "auto_approve_deletions",
            "allow_template_builds",
            "comments",
            "tags",
        )


#
# Synced data
#


class HvClusterForm(NetBoxModelForm):
    endpoint = DynamicModelChoiceField(queryset=models.HvEndpoint.objects.all())
    cluster = optional_field(Cluster, "NetBox cluster")

    class Meta:
        model = models.HvCluster
        fields = (*PLUGIN_RECORDS["cluster"].fields, "tags")


class HvNodeForm(NetBoxModelForm):
    cluster = DynamicModelChoiceField(queryset=models.HvCluster.objects.all())
    device = optional_field(Device)

    class Meta:
        model = models.HvNode
        fields = (*PLUGIN_RECORDS["node"].fields, "tags")


class HvStorageForm(NetBoxModelForm):
    cluster = DynamicModelChoiceField(queryset=models.HvCluster.objects.all())
    nodes = DynamicModelMultipleChoiceField(
        queryset=models.HvNode.objects.all(), required=False, query_params={"cluster_id": "$cluster"}
    )

    class Meta:
        model = models.HvStorage
        fields = (*PLUGIN_RECORDS["storage"].fields, "tags")


class HvBackupForm(NetBoxModelForm):
    storage = DynamicModelChoiceField(queryset=models.HvStorage.objects.all())
    virtual_machine = optional_field(VirtualMachine, "Virtual machine")

    class Meta:
        model = models.HvBackup
        fields = (*PLUGIN_RECORDS["backup"].fields, "tags")


class HvSnapshotForm(NetBoxModelForm):
    virtual_machine = DynamicModelChoiceField(queryset=VirtualMachine.objects.all())

    class Meta:
        model = models.HvSnapshot
        fields = (*PLUGIN_RECORDS["snapshot"].fields, "tags")


class HvTaskHistoryForm(NetBoxModelForm):
    endpoint = DynamicModelChoiceField(queryset=models.HvEndpoint.objects.all())
    node = optional_field(models.HvNode, query_params={"endpoint_id": "$endpoint"})
    virtual_machine = optional_field(VirtualMachine, "Virtual machine")

    class Meta:
        model = models.HvTaskHistory
        fields = (*PLUGIN_RECORDS["task-history"].fields, "tags")


class BackupRoutineForm(NetBoxModelForm):
    endpoint = DynamicModelChoiceField(queryset=models.HvEndpoint.objects.all())
    node = optional_field(models.HvNode, query_params={"endpoint_id": "$endpoint"})
    storage = optional_field(models.HvStorage, query_params={"endpoint_id": "$endpoint"})
    fleecing_storage = optional_field(
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
    endpoint = optional_field(models.HvEndpoint, "Proxmox endpoint")
    virtual_machine = DynamicModelChoiceField(queryset=VirtualMachine.objects.all())
    hv_node = optional_field(models.HvNode, "Source node", query_params={"endpoint_id": "$endpoint"})

    class Meta:
        model = models.Replication
        fields = (*models.Replication.spec_fields, "tags")


class DeletionRequestForm(NetBoxModelForm):
    """Asking for a deletion; the requester is the logged-in user, the decision is a separate step."""

    endpoint = optional_field(models.HvEndpoint, "Proxmox endpoint")
    object_type = forms.ModelChoiceField(
        queryset=ContentType.objects.filter(app_label__in=("virtualization", "dcim", "ipam", "netbox_hvsync"))
    )

    class Meta:
        model = models.DeletionRequest
        fields = ("endpoint", "object_type", "object_id", "object_repr", "reason", "tags")


__all__ = [
    "BackendEndpointForm",
    "BackupRoutineForm",
    "DeletionRequestForm",
    "HvBackupForm",
    "HvClusterForm",
    "HvEndpointForm",
    "HvNodeForm",
    "HvSnapshotForm",
    "HvStorageForm",
    "HvTaskHistoryForm",
    "InventoryEndpointForm",
    "ReplicationForm",
]
