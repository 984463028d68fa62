"""GraphQL types of the plugin's models, on NetBox's base types so object permissions apply.

`NetBoxObjectType`/`ObjectType` restrict every queryset to what the user may view (the same
`RestrictedQuerySet.restrict()` as the REST API). Each type names its fields explicitly (`fields=`, never
`__all__` or an exclude list): the encrypted credential columns (`token_ciphertext`,
`token_value_ciphertext`, `password_ciphertext`) are not in any list, so a column added later is hidden
until someone decides to show it. What is shown mirrors `api/serializers.py`, including the
`has_<secret>` presence flags in place of the secrets.
"""

from typing import Annotated

import strawberry
import strawberry_django
from netbox.graphql.scalars import BigInt
from netbox.graphql.types import NetBoxObjectType, ObjectType

from netbox_hvsync import models
from netbox_hvsync.wire import PLUGIN_RECORDS

from .filters import (
    ApplyJobFilter,
    BackendEndpointFilter,
    BackupRoutineFilter,
    DeletionRequestFilter,
    HvBackupFilter,
    HvClusterFilter,
    HvEndpointFilter,
    HvNodeFilter,
    HvSnapshotFilter,
    HvStorageFilter,
    HvTaskHistoryFilter,
    InventoryEndpointFilter,
    ReplicationFilter,
    SyncedDeviceFilter,
    SyncedInterfaceFilter,
    SyncedIPAddressFilter,
    SyncedPrefixFilter,
    SyncedVirtualDiskFilter,
    SyncedVirtualMachineFilter,
    SyncedVLANFilter,
)

__all__ = (
    "ApplyJobType",
    "BackendEndpointType",
    "BackupRoutineType",
    "DeletionRequestType",
    "HvBackupType",
    "HvClusterType",
    "HvEndpointType",
    "HvNodeType",
    "HvSnapshotType",
    "HvStorageType",
    "HvTaskHistoryType",
    "InventoryEndpointType",
    "ReplicationType",
    "SyncedDeviceType",
    "SyncedIPAddressType",
    "SyncedInterfaceType",
    "SyncedPrefixType",
    "SyncedVLANType",
    "SyncedVirtualDiskType",
    "SyncedVirtualMachineType",
)

HERE = strawberry.lazy("netbox_hvsync.graphql.types")
DCIM = strawberry.lazy("dcim.graphql.types")
IPAM = strawberry.lazy("ipam.graphql.types")
TENANCY = strawberry.lazy("tenancy.graphql.types")
USERS = strawberry.lazy("users.graphql.types")
VIRT = strawberry.lazy("virtualization.graphql.types")
NETBOX = strawberry.lazy("netbox.graphql.types")

CHANGE_FIELDS = ["id", "created", "last_updated"]
SIDECAR_FIELDS = [
    *CHANGE_FIELDS,
    "endpoint",
    "last_seen",
    "gone_since",
    "gone_request",
    "gone_prior_status",
    "last_run_id",
]


#
# Connection records
#


@strawberry_django.type(
    models.BackendEndpoint,
    fields=[
        *CHANGE_FIELDS,
        "name",
        "enabled",
        "ip_address",
        "port",
        "verify_ssl",
        "key_state",
        "key_fingerprint",
        "comments",
    ],
    filters=BackendEndpointFilter,
    pagination=True,
)
class BackendEndpointType(NetBoxObjectType):
    ip_address: Annotated["IPAddressType", IPAM] | None  # noqa: F821
    # The model's `url` column is called `backend_url` here as in the REST API, where `url` is the API link.
    backend_url: str = strawberry_django.field(field_name="url")

    @strawberry_django.field(only=["token_ciphertext"])
    def has_token(self) -> bool:
        return bool(self.token_ciphertext)

    @strawberry_django.field(only=["key_fingerprint"])
    def is_pending(self) -> bool:
        return not self.key_fingerprint


@strawberry_django.type(
    models.InventoryEndpoint,
    fields=[
        *CHANGE_FIELDS,
        "name",
        "scheme",
        "ip_address",
        "domain",
        "port",
        "token_version",
        "token_key",
        "verify_ssl",
        "enabled",
        "pushed_credential_fingerprint",
        "comments",
    ],
    filters=InventoryEndpointFilter,
    pagination=True,
)
class InventoryEndpointType(NetBoxObjectType):
    ip_address: Annotated["IPAddressType", IPAM] | None  # noqa: F821

    @strawberry_django.field(only=["token_ciphertext"])
    def has_token(self) -> bool:
        return bool(self.token_ciphertext)


@strawberry_django.type(
    models.HvEndpoint,
    fields=[
        *CHANGE_FIELDS,
        "name",
        "ip_address",
        "domain",
        "port",
        "username",
        "token_name",
        "verify_ssl",
        "enabled",
        "timeout",
        "max_retries",
        "retry_backoff",
        "sync_mode_vm",
        "sync_mode_vm_template",
        "gone_policy",
        "gone_status",
        "gone_guard_share",
        "auto_approve_deletions",
        "allow_template_builds",
        "template_build_grant_confirmed",
        "site",
        "tenant",
        "backend_id",
        "comments",
    ],
    filters=HvEndpointFilter,
    pagination=True,
)
class HvEndpointType(NetBoxObjectType):
    ip_address: Annotated["IPAddressType", IPAM] | None  # noqa: F821
    site: Annotated["SiteType", DCIM] | None  # noqa: F821
    tenant: Annotated["TenantType", TENANCY] | None  # noqa: F821
    access_methods: list[str]

    @strawberry_django.field(only=["token_value_ciphertext"])
    def has_token_value(self) -> bool:
        return bool(self.token_value_ciphertext)

    @strawberry_django.field(only=["password_ciphertext"])
    def has_password(self) -> bool:
        return bool(self.password_ciphertext)


#
# Synced data
#


@strawberry_django.type(
    models.HvCluster,
    fields=[*CHANGE_FIELDS, *PLUGIN_RECORDS["cluster"].fields, "last_complete_read"],
    filters=HvClusterFilter,
    pagination=True,
)
class HvClusterType(NetBoxObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    cluster: Annotated["ClusterType", VIRT] | None  # noqa: F821


@strawberry_django.type(
    models.HvNode,
    fields=[*CHANGE_FIELDS, *PLUGIN_RECORDS["node"].fields],
    filters=HvNodeFilter,
    pagination=True,
)
class HvNodeType(NetBoxObjectType):
    cluster: Annotated["HvClusterType", HERE]
    device: Annotated["DeviceType", DCIM] | None  # noqa: F821


@strawberry_django.type(
    models.HvStorage,
    fields=[
        *CHANGE_FIELDS,
        "cluster",
        "name",
        "storage_type",
        "shared",
        "active",
        "enabled",
        "nodes",
        "gone_since",
    ],
    filters=HvStorageFilter,
    pagination=True,
)
class HvStorageType(NetBoxObjectType):
    cluster: Annotated["HvClusterType", HERE]
    content: list[str]
    total: BigInt | None
    used: BigInt | None
    avail: BigInt | None
    nodes: list[Annotated["HvNodeType", HERE]]


@strawberry_django.type(
    models.HvBackup,
    fields=[
        *CHANGE_FIELDS,
        "storage",
        "volid",
        "vmid",
        "virtual_machine",
        "ctime",
        "format",
        "notes",
        "protected",
        "verification_state",
        "gone_since",
    ],
    filters=HvBackupFilter,
    pagination=True,
)
class HvBackupType(NetBoxObjectType):
    storage: Annotated["HvStorageType", HERE]
    virtual_machine: Annotated["VirtualMachineType", VIRT] | None  # noqa: F821
    size: BigInt | None


@strawberry_django.type(
    models.HvSnapshot,
    fields=[*CHANGE_FIELDS, *PLUGIN_RECORDS["snapshot"].fields, "gone_since"],
    filters=HvSnapshotFilter,
    pagination=True,
)
class HvSnapshotType(NetBoxObjectType):
    virtual_machine: Annotated["VirtualMachineType", VIRT]  # noqa: F821


@strawberry_django.type(
    models.HvTaskHistory,
    fields=[*CHANGE_FIELDS, *PLUGIN_RECORDS["task-history"].fields],
    filters=HvTaskHistoryFilter,
    pagination=True,
)
class HvTaskHistoryType(NetBoxObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    node: Annotated["HvNodeType", HERE] | None
    virtual_machine: Annotated["VirtualMachineType", VIRT] | None  # noqa: F821


@strawberry_django.type(
    models.BackupRoutine,
    fields=[*CHANGE_FIELDS, *models.BackupRoutine.spec_fields, "gone_since"],
    filters=BackupRoutineFilter,
    pagination=True,
)
class BackupRoutineType(NetBoxObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    node: Annotated["HvNodeType", HERE] | None
    storage: Annotated["HvStorageType", HERE] | None
    fleecing_storage: Annotated["HvStorageType", HERE] | None
    selection: list[int]


@strawberry_django.type(
    models.Replication,
    fields=[*CHANGE_FIELDS, *models.Replication.spec_fields, "gone_since"],
    filters=ReplicationFilter,
    pagination=True,
)
class ReplicationType(NetBoxObjectType):
    endpoint: Annotated["HvEndpointType", HERE] | None
    virtual_machine: Annotated["VirtualMachineType", VIRT]  # noqa: F821
    hv_node: Annotated["HvNodeType", HERE] | None


#
# Audit records
#


@strawberry_django.type(
    models.DeletionRequest,
    fields=[
        *CHANGE_FIELDS,
        "endpoint",
        "object_type",
        "object_repr",
        "identity",
        "run_id",
        "reason",
        "gone_since",
        "status",
        "requested_by",
        "decided_by",
        "decided_at",
        "comment",
        "applied_at",
        "deleted_data",
        "error",
    ],
    filters=DeletionRequestFilter,
    pagination=True,
)
class DeletionRequestType(NetBoxObjectType):
    endpoint: Annotated["HvEndpointType", HERE] | None
    object_type: Annotated["ContentTypeType", NETBOX]  # noqa: F821
    object_id: BigInt
    requested_by: Annotated["UserType", USERS] | None  # noqa: F821
    decided_by: Annotated["UserType", USERS] | None  # noqa: F821


@strawberry_django.type(
    models.ApplyJob,
    fields=[*CHANGE_FIELDS, "endpoint", "status", "plan", "result", "started", "finished", "error"],
    filters=ApplyJobFilter,
    pagination=True,
)
class ApplyJobType(NetBoxObjectType):
    endpoint: Annotated["HvEndpointType", HERE] | None


#
# Sync-state sidecars (change-logged, without tags or custom fields)
#


@strawberry_django.type(
    models.SyncedVirtualMachine,
    fields=[*SIDECAR_FIELDS, "virtual_machine", "cluster", "node_name", "vmid", "vm_type", "is_template"],
    filters=SyncedVirtualMachineFilter,
    pagination=True,
)
class SyncedVirtualMachineType(ObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    virtual_machine: Annotated["VirtualMachineType", VIRT]  # noqa: F821
    cluster: Annotated["HvClusterType", HERE] | None


@strawberry_django.type(
    models.SyncedDevice,
    fields=[*SIDECAR_FIELDS, "device", "node", "node_name"],
    filters=SyncedDeviceFilter,
    pagination=True,
)
class SyncedDeviceType(ObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    device: Annotated["DeviceType", DCIM]  # noqa: F821
    node: Annotated["HvNodeType", HERE] | None


@strawberry_django.type(
    models.SyncedInterface,
    fields=[*SIDECAR_FIELDS, "vm_interface", "interface", "vmid", "node_name", "key"],
    filters=SyncedInterfaceFilter,
    pagination=True,
)
class SyncedInterfaceType(ObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    vm_interface: Annotated["VMInterfaceType", VIRT] | None  # noqa: F821
    interface: Annotated["InterfaceType", DCIM] | None  # noqa: F821


@strawberry_django.type(
    models.SyncedVirtualDisk,
    fields=[*SIDECAR_FIELDS, "virtual_disk", "vmid", "key"],
    filters=SyncedVirtualDiskFilter,
    pagination=True,
)
class SyncedVirtualDiskType(ObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    virtual_disk: Annotated["VirtualDiskType", VIRT]  # noqa: F821


@strawberry_django.type(
    models.SyncedIPAddress,
    fields=[*SIDECAR_FIELDS, "ip_address", "vmid", "node_name", "interface_key", "address"],
    filters=SyncedIPAddressFilter,
    pagination=True,
)
class SyncedIPAddressType(ObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    ip_address: Annotated["IPAddressType", IPAM]  # noqa: F821


@strawberry_django.type(
    models.SyncedVLAN,
    fields=[*SIDECAR_FIELDS, "vlan", "zone", "vnet"],
    filters=SyncedVLANFilter,
    pagination=True,
)
class SyncedVLANType(ObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    vlan: Annotated["VLANType", IPAM]  # noqa: F821


@strawberry_django.type(
    models.SyncedPrefix,
    fields=[*SIDECAR_FIELDS, "prefix", "vnet", "subnet"],
    filters=SyncedPrefixFilter,
    pagination=True,
)
class SyncedPrefixType(ObjectType):
    endpoint: Annotated["HvEndpointType", HERE]
    prefix: Annotated["PrefixType", IPAM]  # noqa: F821
