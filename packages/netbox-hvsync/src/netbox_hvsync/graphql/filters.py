"""GraphQL filters of the plugin's models, built like NetBox's own (`<app>/graphql/filters.py`).

Only the strawberry_django and `netbox.graphql.filters` names that NetBox 4.5.8, 4.6.8 and 4.7.x all
ship are used (`StrFilterLookup`, `FilterLookup[bool]`, `ComparisonFilterLookup[int]`,
`strawberry_django.filter_type`), so no release needs its own code path. Strings use the plain
`StrFilterLookup`: on 4.7 (strawberry-graphql-django 0.92) `FilterLookup[str]` would be a second string
lookup type beside NetBox's and the schema fails (DuplicatedTypeName). Secret columns have no filter: a
lookup on ciphertext would let a client probe a secret one character at a time.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import strawberry
import strawberry_django
from netbox.graphql.filters import ChangeLoggedModelFilter, NetBoxModelFilter
from strawberry import ID
from strawberry_django import ComparisonFilterLookup, FilterLookup, StrFilterLookup

from netbox_hvsync import models

__all__ = (
    "ApplyJobFilter",
    "BackendEndpointFilter",
    "BackupRoutineFilter",
    "DeletionRequestFilter",
    "HvBackupFilter",
    "HvClusterFilter",
    "HvEndpointFilter",
    "HvNodeFilter",
    "HvSnapshotFilter",
    "HvStorageFilter",
    "HvTaskHistoryFilter",
    "InventoryEndpointFilter",
    "ReplicationFilter",
    "SyncedDeviceFilter",
    "SyncedIPAddressFilter",
    "SyncedInterfaceFilter",
    "SyncedPrefixFilter",
    "SyncedVLANFilter",
    "SyncedVirtualDiskFilter",
    "SyncedVirtualMachineFilter",
)

LAZY = strawberry.lazy("netbox_hvsync.graphql.filters")
Str = StrFilterLookup
Bool = FilterLookup[bool]
Int = ComparisonFilterLookup[int]
Moment = ComparisonFilterLookup[datetime]


@dataclass
class EndpointFilterMixin:
    """Records that belong to one Proxmox endpoint filter by it, nested or by id.

    A dataclass like NetBox's own filter mixins, so the decorated filters inherit its fields; the
    filter_field() defaults are field specifications strawberry reads, not shared mutable values.
    """

    endpoint: Annotated["HvEndpointFilter", LAZY] | None = strawberry_django.filter_field()  # noqa: RUF009
    endpoint_id: ID | None = strawberry_django.filter_field()  # noqa: RUF009


@dataclass
class SidecarFilterMixin(EndpointFilterMixin):
    last_run_id: Str | None = strawberry_django.filter_field()  # noqa: RUF009
    #: `gone_since: {isNull: false}` lists what is gone from Proxmox (REST: `gone=true`)
    gone_since: Moment | None = strawberry_django.filter_field()  # noqa: RUF009


#
# Connection records
#


@strawberry_django.filter_type(models.BackendEndpoint, lookups=True)
class BackendEndpointFilter(NetBoxModelFilter):
    name: Str | None = strawberry_django.filter_field()
    enabled: Bool | None = strawberry_django.filter_field()
    ip_address_id: ID | None = strawberry_django.filter_field()
    port: Int | None = strawberry_django.filter_field()
    verify_ssl: Bool | None = strawberry_django.filter_field()
    key_state: Str | None = strawberry_django.filter_field()
    key_fingerprint: Str | None = strawberry_django.filter_field()
    comments: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.InventoryEndpoint, lookups=True)
class InventoryEndpointFilter(NetBoxModelFilter):
    name: Str | None = strawberry_django.filter_field()
    scheme: Str | None = strawberry_django.filter_field()
    ip_address_id: ID | None = strawberry_django.filter_field()
    domain: Str | None = strawberry_django.filter_field()
    port: Int | None = strawberry_django.filter_field()
    token_version: Int | None = strawberry_django.filter_field()
    token_key: Str | None = strawberry_django.filter_field()
    verify_ssl: Bool | None = strawberry_django.filter_field()
    enabled: Bool | None = strawberry_django.filter_field()
    comments: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.HvEndpoint, lookups=True)
class HvEndpointFilter(NetBoxModelFilter):
    name: Str | None = strawberry_django.filter_field()
    ip_address_id: ID | None = strawberry_django.filter_field()
    domain: Str | None = strawberry_django.filter_field()
    port: Int | None = strawberry_django.filter_field()
    username: Str | None = strawberry_django.filter_field()
    token_name: Str | None = strawberry_django.filter_field()
    verify_ssl: Bool | None = strawberry_django.filter_field()
    enabled: Bool | None = strawberry_django.filter_field()
    timeout: Int | None = strawberry_django.filter_field()
    max_retries: Int | None = strawberry_django.filter_field()
    allow_template_builds: Bool | None = strawberry_django.filter_field()
    sync_mode_vm: Bool | None = strawberry_django.filter_field()
    sync_mode_vm_template: Bool | None = strawberry_django.filter_field()
    gone_policy: Str | None = strawberry_django.filter_field()
    auto_approve_deletions: Bool | None = strawberry_django.filter_field()
    template_build_grant_confirmed: Bool | None = strawberry_django.filter_field()
    site_id: ID | None = strawberry_django.filter_field()
    tenant_id: ID | None = strawberry_django.filter_field()
    backend_id: Int | None = strawberry_django.filter_field()
    comments: Str | None = strawberry_django.filter_field()


#
# Synced data
#


@strawberry_django.filter_type(models.HvCluster, lookups=True)
class HvClusterFilter(EndpointFilterMixin, NetBoxModelFilter):
    name: Str | None = strawberry_django.filter_field()
    cluster_id: ID | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.HvNode, lookups=True)
class HvNodeFilter(NetBoxModelFilter):
    cluster: Annotated["HvClusterFilter", LAZY] | None = strawberry_django.filter_field()
    cluster_id: ID | None = strawberry_django.filter_field()
    name: Str | None = strawberry_django.filter_field()
    node_id: Int | None = strawberry_django.filter_field()
    online: Bool | None = strawberry_django.filter_field()
    device_id: ID | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.HvStorage, lookups=True)
class HvStorageFilter(NetBoxModelFilter):
    cluster: Annotated["HvClusterFilter", LAZY] | None = strawberry_django.filter_field()
    cluster_id: ID | None = strawberry_django.filter_field()
    name: Str | None = strawberry_django.filter_field()
    storage_type: Str | None = strawberry_django.filter_field()
    shared: Bool | None = strawberry_django.filter_field()
    active: Bool | None = strawberry_django.filter_field()
    enabled: Bool | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.HvBackup, lookups=True)
class HvBackupFilter(NetBoxModelFilter):
    storage: Annotated["HvStorageFilter", LAZY] | None = strawberry_django.filter_field()
    storage_id: ID | None = strawberry_django.filter_field()
    volid: Str | None = strawberry_django.filter_field()
    vmid: Int | None = strawberry_django.filter_field()
    virtual_machine_id: ID | None = strawberry_django.filter_field()
    format: Str | None = strawberry_django.filter_field()
    protected: Bool | None = strawberry_django.filter_field()
    verification_state: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.HvSnapshot, lookups=True)
class HvSnapshotFilter(NetBoxModelFilter):
    virtual_machine_id: ID | None = strawberry_django.filter_field()
    name: Str | None = strawberry_django.filter_field()
    parent: Str | None = strawberry_django.filter_field()
    vmstate: Bool | None = strawberry_django.filter_field()
    description: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.HvTaskHistory, lookups=True)
class HvTaskHistoryFilter(EndpointFilterMixin, NetBoxModelFilter):
    node_id: ID | None = strawberry_django.filter_field()
    upid: Str | None = strawberry_django.filter_field()
    task_type: Str | None = strawberry_django.filter_field()
    vmid: Int | None = strawberry_django.filter_field()
    virtual_machine_id: ID | None = strawberry_django.filter_field()
    user: Str | None = strawberry_django.filter_field()
    status: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.BackupRoutine, lookups=True)
class BackupRoutineFilter(EndpointFilterMixin, NetBoxModelFilter):
    job_id: Str | None = strawberry_django.filter_field()
    enabled: Bool | None = strawberry_django.filter_field()
    schedule: Str | None = strawberry_django.filter_field()
    node_id: ID | None = strawberry_django.filter_field()
    storage_id: ID | None = strawberry_django.filter_field()
    comment: Str | None = strawberry_django.filter_field()
    status: Str | None = strawberry_django.filter_field()
    pbs_change_detection_mode: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.Replication, lookups=True)
class ReplicationFilter(EndpointFilterMixin, NetBoxModelFilter):
    replication_id: Str | None = strawberry_django.filter_field()
    virtual_machine_id: ID | None = strawberry_django.filter_field()
    hv_node_id: ID | None = strawberry_django.filter_field()
    guest: Int | None = strawberry_django.filter_field()
    target: Str | None = strawberry_django.filter_field()
    job_type: Str | None = strawberry_django.filter_field()
    source: Str | None = strawberry_django.filter_field()
    jobnum: Int | None = strawberry_django.filter_field()
    disable: Bool | None = strawberry_django.filter_field()
    status: Str | None = strawberry_django.filter_field()


#
# Audit records
#


@strawberry_django.filter_type(models.DeletionRequest, lookups=True)
class DeletionRequestFilter(EndpointFilterMixin, NetBoxModelFilter):
    object_type_id: ID | None = strawberry_django.filter_field()
    object_id: Int | None = strawberry_django.filter_field()
    object_repr: Str | None = strawberry_django.filter_field()
    status: Str | None = strawberry_django.filter_field()
    requested_by_id: ID | None = strawberry_django.filter_field()
    decided_by_id: ID | None = strawberry_django.filter_field()
    identity: Str | None = strawberry_django.filter_field()
    run_id: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.ApplyJob, lookups=True)
class ApplyJobFilter(EndpointFilterMixin, NetBoxModelFilter):
    status: Str | None = strawberry_django.filter_field()
    error: Str | None = strawberry_django.filter_field()


#
# Sync-state sidecars
#


@strawberry_django.filter_type(models.SyncedVirtualMachine, lookups=True)
class SyncedVirtualMachineFilter(SidecarFilterMixin, ChangeLoggedModelFilter):
    virtual_machine_id: ID | None = strawberry_django.filter_field()
    cluster_id: ID | None = strawberry_django.filter_field()
    node_name: Str | None = strawberry_django.filter_field()
    vmid: Int | None = strawberry_django.filter_field()
    vm_type: Str | None = strawberry_django.filter_field()
    is_template: Bool | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.SyncedDevice, lookups=True)
class SyncedDeviceFilter(SidecarFilterMixin, ChangeLoggedModelFilter):
    device_id: ID | None = strawberry_django.filter_field()
    node_id: ID | None = strawberry_django.filter_field()
    node_name: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.SyncedInterface, lookups=True)
class SyncedInterfaceFilter(SidecarFilterMixin, ChangeLoggedModelFilter):
    vm_interface_id: ID | None = strawberry_django.filter_field()
    interface_id: ID | None = strawberry_django.filter_field()
    vmid: Int | None = strawberry_django.filter_field()
    node_name: Str | None = strawberry_django.filter_field()
    key: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.SyncedVirtualDisk, lookups=True)
class SyncedVirtualDiskFilter(SidecarFilterMixin, ChangeLoggedModelFilter):
    virtual_disk_id: ID | None = strawberry_django.filter_field()
    vmid: Int | None = strawberry_django.filter_field()
    key: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.SyncedIPAddress, lookups=True)
class SyncedIPAddressFilter(SidecarFilterMixin, ChangeLoggedModelFilter):
    ip_address_id: ID | None = strawberry_django.filter_field()
    vmid: Int | None = strawberry_django.filter_field()
    node_name: Str | None = strawberry_django.filter_field()
    interface_key: Str | None = strawberry_django.filter_field()
    address: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.SyncedVLAN, lookups=True)
class SyncedVLANFilter(SidecarFilterMixin, ChangeLoggedModelFilter):
    vlan_id: ID | None = strawberry_django.filter_field()
    zone: Str | None = strawberry_django.filter_field()
    vnet: Str | None = strawberry_django.filter_field()


@strawberry_django.filter_type(models.SyncedPrefix, lookups=True)
class SyncedPrefixFilter(SidecarFilterMixin, ChangeLoggedModelFilter):
    prefix_id: ID | None = strawberry_django.filter_field()
    vnet: Str | None = strawberry_django.filter_field()
    subnet: Str | None = strawberry_django.filter_field()
