"""REST serializers: NetBox-style nested objects, choices as {value, label}, secrets write-only."""

from __future__ import annotations

from typing import Any

from dcim.api.serializers import DeviceSerializer, InterfaceSerializer, SiteSerializer
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, transaction
from ipam.api.serializers import IPAddressSerializer, PrefixSerializer, VLANSerializer
from netbox.api.fields import ChoiceField, ContentTypeField
from netbox.api.serializers import NetBoxModelSerializer, ValidatedModelSerializer, WritableNestedSerializer
from rest_framework import serializers
from tenancy.api.serializers import TenantSerializer
from users.api.serializers import UserSerializer
from virtualization.api.serializers import (
    ClusterSerializer,
    VirtualDiskSerializer,
    VirtualMachineSerializer,
    VMInterfaceSerializer,
)

from netbox_hvsync import models
from netbox_hvsync.backend.adoption import KeyAdoptionRefused
from netbox_hvsync.choices import (
    AccessMethodChoices,
    ApplyJobStatusChoices,
    BackupVerificationChoices,
    DeletionRequestStatusChoices,
    KeyStateChoices,
    PbsChangeDetectionModeChoices,
    RemoveJobChoices,
    ReplicationJobTypeChoices,
    SyncedStatusChoices,
    TokenVersionChoices,
    VmTypeChoices,
)
from netbox_hvsync.rules.urls import TargetError, backend_url_target

NETBOX_FEATURE_FIELDS = ("tags", "custom_fields", "created", "last_updated")


def secret_field(label: str) -> serializers.CharField:
    """A write-only secret: never rendered; blank or null on update keeps the stored value (SPEC 5.2.9)."""
    return serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=1024,
        style={"input_type": "password"},
        help_text=f"{label}; write-only, never returned",
    )


class StorableRelatedLookups:
    """A related object given by attributes (`{"address": ...}`) is looked up in the database with whatever
    the client sent; a value the column cannot hold (`{"address": [null, null]}`, found by the REST fuzz
    run) raised a database error: a 500, and an aborted transaction. Each lookup runs in a savepoint and
    such a value is a 400 naming the field."""

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()  # type: ignore[misc]
        for field in fields.values():
            if field.read_only:
                continue
            # one related object, or each of a list of them (tags: `{"name": "\x00"}` was a 500 too)
            target = getattr(field, "child", field)
            if getattr(target, "nested", False) or isinstance(target, WritableNestedSerializer):
                target.to_internal_value = _storable_lookup(target.to_internal_value)
        return fields


def _storable_lookup(lookup: Any) -> Any:
    def to_internal_value(data: Any) -> Any:
        try:
            with transaction.atomic():
                return lookup(data)
        except (DataError, ValueError, TypeError, OverflowError):
            raise serializers.ValidationError(
                "Related object not found: give its numeric id or attributes with values of their type."
            ) from None

    return to_internal_value


class HvsyncModelSerializer(StorableRelatedLookups, NetBoxModelSerializer):
    """Base of the plugin's model serializers."""


class HvsyncSidecarSerializer(StorableRelatedLookups, ValidatedModelSerializer):
    """Base of the sync-state sidecar serializers (no tags or custom fields)."""


class SecretFieldsMixin:
    """Drops blank/null secrets before model validation so they count as omitted."""

    secret_fields: tuple[str, ...] = ()

    def validate(self, data: Any) -> Any:
        if getattr(self, "nested", False):  # a nested reference resolves to an existing object
            return super().validate(data)  # type: ignore[misc]
        for name in self.secret_fields:
            if name in data and not data[name]:
                data.pop(name)
        return super().validate(data)  # type: ignore[misc]


#
# Connection records
#


class BackendEndpointSerializer(SecretFieldsMixin, HvsyncModelSerializer):
    secret_fields = ("token",)
    ip_address = IPAddressSerializer(nested=True, required=False, allow_null=True)
    # Adoption owns the key state (SPEC 5.2): only a verified key makes a row adopted, never a client.
    key_state = ChoiceField(choices=KeyStateChoices, read_only=True)
    # The model's `url` column (the backend's base URL) would clash with NetBox's `url` (the API link).
    backend_url = serializers.CharField(
        source="url", required=False, allow_blank=True, max_length=500, help_text="Backend base URL"
    )
    token = secret_field("Backend API key")
    has_token = serializers.BooleanField(read_only=True)
    is_pending = serializers.BooleanField(read_only=True)

    class Meta:
        model = models.BackendEndpoint
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "name",
            "enabled",
            "backend_url",
            "ip_address",
            "port",
            "verify_ssl",
            "token",
            "has_token",
            "key_state",
            "key_fingerprint",
            "is_pending",
            "comments",
            *NETBOX_FEATURE_FIELDS,
        )
        read_only_fields = ("key_fingerprint",)
        brief_fields = ("id", "url", "display", "name")

    def validate(self, data: Any) -> Any:
        """URL rejections name `backend_url`, the field the client sent (SPEC 5.2.5, 7.2)."""
        url = data.get("url")
        if url:
            port = data.get("port", self.instance.port if self.instance else None)
            try:
                backend_url_target(url, port)
            except TargetError as exc:
                raise serializers.ValidationError(
                    {"backend_url" if exc.field == "url" else exc.field: [exc.message]}
                ) from None
        try:
            return super().validate(data)
        except DjangoValidationError as exc:  # the model's clean() names its column, `url`
            errors = serializers.as_serializer_error(exc)
            if "url" in errors:
                errors["backend_url"] = errors.pop("url")
            raise serializers.ValidationError(errors) from None

    def save(self, **kwargs: Any) -> Any:
        """Key adoption refusals (raised by the save itself, SPEC 5.2.1) as field-keyed validation errors."""
        try:
            return super().save(**kwargs)
        except KeyAdoptionRefused as exc:
            raise serializers.ValidationError({exc.field: [exc.message]}) from None


class InventoryEndpointSerializer(SecretFieldsMixin, HvsyncModelSerializer):
    secret_fields = ("token",)
    ip_address = IPAddressSerializer(nested=True, required=False, allow_null=True)
    token_version = ChoiceField(choices=TokenVersionChoices, required=False)
    token = secret_field("NetBox API token")
    has_token = serializers.BooleanField(read_only=True)

    class Meta:
        model = models.InventoryEndpoint
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "name",
            "ip_address",
            "domain",
            "port",
            "token_version",
            "token_key",
            "token",
            "has_token",
            "verify_ssl",
            "enabled",
            "pushed_credential_fingerprint",
            "comments",
            *NETBOX_FEATURE_FIELDS,
        )
        read_only_fields = ("pushed_credential_fingerprint",)
        brief_fields = ("id", "url", "display", "name")


class HvEndpointSerializer(SecretFieldsMixin, HvsyncModelSerializer):
    secret_fields = ("token_value", "password")
    ip_address = IPAddressSerializer(nested=True, required=False, allow_null=True)
    site = SiteSerializer(nested=True, required=False, allow_null=True)
    tenant = TenantSerializer(nested=True, required=False, allow_null=True)
    access_methods = serializers.ListField(
        child=serializers.ChoiceField(choices=AccessMethodChoices.values()), required=False
    )
    token_value = secret_field("Proxmox API token secret")
    password = secret_field("Proxmox password")
    has_token_value = serializers.BooleanField(read_only=True)
    has_password = serializers.BooleanField(read_only=True)

    class Meta:
        model = models.HvEndpoint
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "name",
            "ip_address",
            "domain",
            "port",
            "username",
            "access_methods",
            "token_name",
            "token_value",
            "has_token_value",
            "password",
            "has_password",
            "verify_ssl",
            "enabled",
            "timeout",
            "max_retries",
            "retry_backoff",
            "sync_mode_vm",
            "sync_mode_vm_template",
            "allow_template_builds",
            "template_build_grant_confirmed",
            "site",
            "tenant",
            "backend_id",
            "comments",
            *NETBOX_FEATURE_FIELDS,
        )
        read_only_fields = ("template_build_grant_confirmed", "backend_id")
        brief_fields = ("id", "url", "display", "name")


#
# Synced data
#


class HvClusterSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    cluster = ClusterSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.HvCluster
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "endpoint",
            "name",
            "cluster",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "name")


class HvNodeSerializer(HvsyncModelSerializer):
    cluster = HvClusterSerializer(nested=True)
    device = DeviceSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.HvNode
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "cluster",
            "name",
            "node_id",
            "online",
            "device",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "name", "node_id", "online")


class HvStorageSerializer(HvsyncModelSerializer):
    cluster = HvClusterSerializer(nested=True)
    content = serializers.ListField(child=serializers.CharField(max_length=30), required=False)
    nodes = HvNodeSerializer(nested=True, many=True, required=False)

    class Meta:
        model = models.HvStorage
        fields = (
            "id",
            "url",
            "display_url",
            "display",
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
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "cluster", "name")

    def to_representation(self, instance: models.HvStorage) -> dict[str, Any]:
        data = super().to_representation(instance)
        if self.nested and "cluster" in data and instance.cluster_id:
            # SPEC 2.4: a nested storage carries its cluster as {id, name}
            data["cluster"] = {"id": instance.cluster_id, "name": instance.cluster.name}
        return data

    def create(self, validated_data: dict[str, Any]) -> models.HvStorage:
        nodes = validated_data.pop("nodes", None)
        instance = super().create(validated_data)
        if nodes is not None:
            instance.nodes.set(nodes)
        return instance

    def update(self, instance: models.HvStorage, validated_data: dict[str, Any]) -> models.HvStorage:
        nodes = validated_data.pop("nodes", None)
        instance = super().update(instance, validated_data)
        if nodes is not None:
            instance.nodes.set(nodes)
        return instance


class HvBackupSerializer(HvsyncModelSerializer):
    storage = HvStorageSerializer(nested=True)
    virtual_machine = VirtualMachineSerializer(nested=True, required=False, allow_null=True)
    verification_state = ChoiceField(choices=BackupVerificationChoices, required=False)

    class Meta:
        model = models.HvBackup
        fields = (
            "id",
            "url",
            "display_url",
            "display",
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
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "volid", "vmid")


class HvSnapshotSerializer(HvsyncModelSerializer):
    virtual_machine = VirtualMachineSerializer(nested=True)

    class Meta:
        model = models.HvSnapshot
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "virtual_machine",
            "name",
            "parent",
            "snaptime",
            "vmstate",
            "description",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "name")


class HvTaskHistorySerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    node = HvNodeSerializer(nested=True, required=False, allow_null=True)
    virtual_machine = VirtualMachineSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.HvTaskHistory
        fields = (
            "id",
            "url",
            "display_url",
            "display",
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
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "upid")


class BackupRoutineSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    node = HvNodeSerializer(nested=True, required=False, allow_null=True)
    storage = HvStorageSerializer(nested=True, required=False, allow_null=True)
    fleecing_storage = HvStorageSerializer(nested=True, required=False, allow_null=True)
    selection = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False)
    status = ChoiceField(choices=SyncedStatusChoices, required=False)
    pbs_change_detection_mode = serializers.ChoiceField(
        choices=PbsChangeDetectionModeChoices.values(), required=False, allow_blank=True
    )
    raw_config = serializers.DictField(required=False)

    class Meta:
        model = models.BackupRoutine
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            *models.BackupRoutine.spec_fields,
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "job_id")


class ReplicationSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True, required=False, allow_null=True)
    virtual_machine = VirtualMachineSerializer(nested=True)
    hv_node = HvNodeSerializer(nested=True, required=False, allow_null=True)
    job_type = ChoiceField(choices=ReplicationJobTypeChoices, required=False)
    remove_job = ChoiceField(choices=RemoveJobChoices, required=False, allow_null=True, allow_blank=True)
    status = ChoiceField(choices=SyncedStatusChoices, required=False)
    raw_config = serializers.DictField(required=False)

    class Meta:
        model = models.Replication
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            *models.Replication.spec_fields,
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "replication_id")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("remove_job") == "":
            data["remove_job"] = None
        return super().validate(data)


#
# Read-only audit records
#


class DeletionRequestSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True, read_only=True)
    object_type = ContentTypeField(read_only=True)
    status = ChoiceField(choices=DeletionRequestStatusChoices, read_only=True)
    requested_by = UserSerializer(nested=True, read_only=True)
    approved_by = UserSerializer(nested=True, read_only=True)

    class Meta:
        model = models.DeletionRequest
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "endpoint",
            "object_type",
            "object_id",
            "object_repr",
            "reason",
            "status",
            "requested_by",
            "approved_by",
            "decided_at",
            "executed_at",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "status")


class ApplyJobSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True, read_only=True)
    status = ChoiceField(choices=ApplyJobStatusChoices, read_only=True)

    class Meta:
        model = models.ApplyJob
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "endpoint",
            "status",
            "plan",
            "result",
            "started",
            "finished",
            "error",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "status")


#
# Sync-state sidecars
#

SIDECAR_COMMON = ("id", "url", "display", "endpoint", "last_seen", "last_run_id", "created", "last_updated")


class SyncedVirtualMachineSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    virtual_machine = VirtualMachineSerializer(nested=True)
    cluster = HvClusterSerializer(nested=True, required=False, allow_null=True)
    vm_type = ChoiceField(choices=VmTypeChoices, required=False)

    class Meta:
        model = models.SyncedVirtualMachine
        fields = (
            *SIDECAR_COMMON,
            "virtual_machine",
            "cluster",
            "node_name",
            "vmid",
            "vm_type",
            "is_template",
        )
        brief_fields = ("id", "url", "display", "vmid")


class SyncedDeviceSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    device = DeviceSerializer(nested=True)
    node = HvNodeSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.SyncedDevice
        fields = (*SIDECAR_COMMON, "device", "node", "node_name")
        brief_fields = ("id", "url", "display", "node_name")


class SyncedInterfaceSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    vm_interface = VMInterfaceSerializer(nested=True, required=False, allow_null=True)
    interface = InterfaceSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.SyncedInterface
        fields = (*SIDECAR_COMMON, "vm_interface", "interface", "vmid", "node_name", "key")
        brief_fields = ("id", "url", "display", "key")


class SyncedVirtualDiskSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    virtual_disk = VirtualDiskSerializer(nested=True)

    class Meta:
        model = models.SyncedVirtualDisk
        fields = (*SIDECAR_COMMON, "virtual_disk", "vmid", "key")
        brief_fields = ("id", "url", "display", "key")


class SyncedIPAddressSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    ip_address = IPAddressSerializer(nested=True)

    class Meta:
        model = models.SyncedIPAddress
        fields = (*SIDECAR_COMMON, "ip_address", "vmid", "node_name", "interface_key", "address")
        brief_fields = ("id", "url", "display", "address")


class SyncedVLANSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    vlan = VLANSerializer(nested=True)

    class Meta:
        model = models.SyncedVLAN
        fields = (*SIDECAR_COMMON, "vlan", "zone", "vnet")
        brief_fields = ("id", "url", "display", "vnet")


class SyncedPrefixSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    prefix = PrefixSerializer(nested=True)

    class Meta:
        model = models.SyncedPrefix
        fields = (*SIDECAR_COMMON, "prefix", "vnet", "subnet")
        brief_fields = ("id", "url", "display", "subnet")
