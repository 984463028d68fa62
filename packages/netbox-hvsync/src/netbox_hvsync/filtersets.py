"""Filter sets for the REST API and list views (SPEC 4.4 names, NetBox lookups such as `__ic`, `__gte`)."""

from __future__ import annotations

import django_filters
from dcim.models import Device, Site
from django.db.models import Q, QuerySet
from ipam.models import IPAddress
from netbox.filtersets import BaseFilterSet, NetBoxModelFilterSet
from tenancy.models import Tenant
from virtualization.models import Cluster, VirtualMachine

from netbox_hvsync import models
from netbox_hvsync.choices import (
    ApplyJobStatusChoices,
    BackupVerificationChoices,
    DeletionRequestStatusChoices,
    KeyStateChoices,
    RemoveJobChoices,
    ReplicationJobTypeChoices,
    SyncedStatusChoices,
    VmTypeChoices,
)


def _related(model: type, field_name: str, label: str) -> django_filters.ModelMultipleChoiceFilter:
    return django_filters.ModelMultipleChoiceFilter(
        field_name=field_name, queryset=model.objects.all(), distinct=False, label=label
    )


def _search(queryset: QuerySet, value: str, *lookups: str) -> QuerySet:
    value = value.strip()
    if not value:
        return queryset
    condition = Q()
    for lookup in lookups:
        condition |= Q(**{f"{lookup}__icontains": value})
    return queryset.filter(condition)


class BackendEndpointFilterSet(NetBoxModelFilterSet):
    key_state = django_filters.MultipleChoiceFilter(choices=KeyStateChoices, distinct=False)

    class Meta:
        model = models.BackendEndpoint
        fields = ("id", "name", "enabled", "url", "port", "verify_ssl", "key_state", "key_fingerprint")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "url", "comments")


class InventoryEndpointFilterSet(NetBoxModelFilterSet):
    class Meta:
        model = models.InventoryEndpoint
        fields = ("id", "name", "domain", "port", "token_version", "verify_ssl", "enabled")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "domain", "comments")


class HvEndpointFilterSet(NetBoxModelFilterSet):
    site_id = _related(Site, "site", "Site (ID)")
    tenant_id = _related(Tenant, "tenant", "Tenant (ID)")
    ip_address_id = _related(IPAddress, "ip_address", "IP address (ID)")

    class Meta:
        model = models.HvEndpoint
        fields = (
            "id",
            "name",
            "domain",
            "port",
            "username",
            "token_name",
            "verify_ssl",
            "enabled",
            "timeout",
            "max_retries",
            "sync_mode_vm",
            "sync_mode_vm_template",
            "allow_template_builds",
            "template_build_grant_confirmed",
            "site",
            "tenant",
            "backend_id",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "domain", "username", "comments")


class HvClusterFilterSet(NetBoxModelFilterSet):
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    cluster_id = _related(Cluster, "cluster", "NetBox cluster (ID)")

    class Meta:
        model = models.HvCluster
        fields = ("id", "name", "endpoint", "cluster")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "cluster__name")


class HvNodeFilterSet(NetBoxModelFilterSet):
    cluster_id = _related(models.HvCluster, "cluster", "Proxmox cluster (ID)")
    endpoint_id = _related(models.HvEndpoint, "cluster__endpoint", "Proxmox endpoint (ID)")
    device_id = _related(Device, "device", "Device (ID)")

    class Meta:
        model = models.HvNode
        fields = ("id", "name", "node_id", "online", "cluster", "device")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "device__name")


class HvStorageFilterSet(NetBoxModelFilterSet):
    cluster_id = _related(models.HvCluster, "cluster", "Proxmox cluster (ID)")
    endpoint_id = _related(models.HvEndpoint, "cluster__endpoint", "Proxmox endpoint (ID)")
    node_id = _related(models.HvNode, "nodes", "Proxmox node (ID)")

    class Meta:
        model = models.HvStorage
        fields = ("id", "name", "storage_type", "shared", "active", "enabled", "cluster")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "storage_type")


class HvBackupFilterSet(NetBoxModelFilterSet):
    storage_id = _related(models.HvStorage, "storage", "Proxmox storage (ID)")
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")
    verification_state = django_filters.MultipleChoiceFilter(
        choices=BackupVerificationChoices, distinct=False
    )

    class Meta:
        model = models.HvBackup
        fields = ("id", "volid", "vmid", "format", "protected", "storage", "virtual_machine", "ctime")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "volid", "notes", "virtual_machine__name")


class HvSnapshotFilterSet(NetBoxModelFilterSet):
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")

    class Meta:
        model = models.HvSnapshot
        fields = ("id", "name", "parent", "vmstate", "virtual_machine", "snaptime")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "name", "description", "virtual_machine__name")


class HvTaskHistoryFilterSet(NetBoxModelFilterSet):
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    node_id = _related(models.HvNode, "node", "Proxmox node (ID)")
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")

    class Meta:
        model = models.HvTaskHistory
        fields = (
            "id",
            "upid",
            "task_type",
            "vmid",
            "user",
            "status",
            "endpoint",
            "node",
            "virtual_machine",
            "starttime",
            "endtime",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "upid", "task_type", "user", "status")


class BackupRoutineFilterSet(NetBoxModelFilterSet):
    """SPEC 4.4: id, endpoint, job_id, enabled, node, storage, status, keep_*; node_id, storage_id; q."""

    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    node_id = _related(models.HvNode, "node", "Proxmox node (ID)")
    storage_id = _related(models.HvStorage, "storage", "Proxmox storage (ID)")
    status = django_filters.MultipleChoiceFilter(choices=SyncedStatusChoices, distinct=False)

    class Meta:
        model = models.BackupRoutine
        fields = (
            "id",
            "endpoint",
            "job_id",
            "enabled",
            "node",
            "storage",
            "status",
            "keep_last",
            "keep_daily",
            "keep_weekly",
            "keep_monthly",
            "keep_yearly",
            "keep_all",
            "schedule",
            "repeat_missed",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "job_id", "comment")


class ReplicationFilterSet(NetBoxModelFilterSet):
    """SPEC 4.4: every listed field, virtual_machine_id, and q over id, VM name, target, comment, source."""

    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")
    hv_node_id = _related(models.HvNode, "hv_node", "Proxmox node (ID)")
    job_type = django_filters.MultipleChoiceFilter(choices=ReplicationJobTypeChoices, distinct=False)
    remove_job = django_filters.MultipleChoiceFilter(
        choices=RemoveJobChoices, distinct=False, null_value=None
    )
    status = django_filters.MultipleChoiceFilter(choices=SyncedStatusChoices, distinct=False)

    class Meta:
        model = models.Replication
        fields = (
            "id",
            "endpoint",
            "replication_id",
            "virtual_machine",
            "hv_node",
            "guest",
            "target",
            "job_type",
            "schedule",
            "disable",
            "source",
            "jobnum",
            "remove_job",
            "status",
            "rate",
        )

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(
            queryset, value, "replication_id", "virtual_machine__name", "target", "comment", "source"
        )


class DeletionRequestFilterSet(NetBoxModelFilterSet):
    status = django_filters.MultipleChoiceFilter(choices=DeletionRequestStatusChoices, distinct=False)
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")

    class Meta:
        model = models.DeletionRequest
        fields = ("id", "status", "object_type", "object_id", "requested_by", "approved_by", "endpoint")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "object_repr", "reason")


class ApplyJobFilterSet(NetBoxModelFilterSet):
    status = django_filters.MultipleChoiceFilter(choices=ApplyJobStatusChoices, distinct=False)
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")

    class Meta:
        model = models.ApplyJob
        fields = ("id", "status", "endpoint", "started", "finished")

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, "error")


#
# Sidecars
#


class SyncedObjectFilterSet(BaseFilterSet):
    q = django_filters.CharFilter(method="search", label="Search")
    endpoint_id = _related(models.HvEndpoint, "endpoint", "Proxmox endpoint (ID)")
    search_fields: tuple[str, ...] = ()

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return _search(queryset, value, *self.search_fields)


class SyncedVirtualMachineFilterSet(SyncedObjectFilterSet):
    search_fields = ("node_name", "virtual_machine__name", "last_run_id")
    virtual_machine_id = _related(VirtualMachine, "virtual_machine", "Virtual machine (ID)")
    vm_type = django_filters.MultipleChoiceFilter(choices=VmTypeChoices, distinct=False)

    class Meta:
        model = models.SyncedVirtualMachine
        fields = ("id", "endpoint", "cluster", "node_name", "vmid", "vm_type", "is_template", "last_run_id")


class SyncedDeviceFilterSet(SyncedObjectFilterSet):
    search_fields = ("node_name", "device__name")
    device_id = _related(Device, "device", "Device (ID)")

    class Meta:
        model = models.SyncedDevice
        fields = ("id", "endpoint", "node", "node_name", "last_run_id")


class SyncedInterfaceFilterSet(SyncedObjectFilterSet):
    search_fields = ("key", "node_name")

    class Meta:
        model = models.SyncedInterface
        fields = ("id", "endpoint", "vm_interface", "interface", "vmid", "node_name", "key", "last_run_id")


class SyncedVirtualDiskFilterSet(SyncedObjectFilterSet):
    search_fields = ("key",)

    class Meta:
        model = models.SyncedVirtualDisk
        fields = ("id", "endpoint", "virtual_disk", "vmid", "key", "last_run_id")


class SyncedIPAddressFilterSet(SyncedObjectFilterSet):
    search_fields = ("address", "interface_key", "node_name")

    class Meta:
        model = models.SyncedIPAddress
        fields = (
            "id",
            "endpoint",
            "ip_address",
            "vmid",
            "node_name",
            "interface_key",
            "address",
            "last_run_id",
        )


class SyncedVLANFilterSet(SyncedObjectFilterSet):
    search_fields = ("zone", "vnet")

    class Meta:
        model = models.SyncedVLAN
        fields = ("id", "endpoint", "vlan", "zone", "vnet", "last_run_id")


class SyncedPrefixFilterSet(SyncedObjectFilterSet):
    search_fields = ("vnet", "subnet")

    class Meta:
        model = models.SyncedPrefix
        fields = ("id", "endpoint", "prefix", "vnet", "subnet", "last_run_id")
