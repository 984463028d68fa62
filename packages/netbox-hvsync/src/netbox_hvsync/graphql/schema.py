"""The plugin's GraphQL queries, merged by NetBox into `/graphql/` (PluginConfig.graphql_schema).

Every model has a single-object query (`hvsync_<model>(id: ...)`) and a list query
(`hvsync_<model>_list(filters: ..., pagination: ...)`), named like NetBox's own (`virtual_machine`,
`virtual_machine_list`) with the `hvsync_` prefix so they never clash with NetBox's or another plugin's.
"""

import strawberry
import strawberry_django

from .types import (
    ApplyJobType,
    BackendEndpointType,
    BackupRoutineType,
    DeletionRequestType,
    HvBackupType,
    HvClusterType,
    HvEndpointType,
    HvNodeType,
    HvSnapshotType,
    HvStorageType,
    HvTaskHistoryType,
    InventoryEndpointType,
    ReplicationType,
    SyncedDeviceType,
    SyncedInterfaceType,
    SyncedIPAddressType,
    SyncedPrefixType,
    SyncedVirtualDiskType,
    SyncedVirtualMachineType,
    SyncedVLANType,
)

__all__ = ("HvsyncQuery", "schema")


@strawberry.type(name="Query")
class HvsyncQuery:
    hvsync_backend_endpoint: BackendEndpointType = strawberry_django.field()
    hvsync_backend_endpoint_list: list[BackendEndpointType] = strawberry_django.field()

    hvsync_inventory_endpoint: InventoryEndpointType = strawberry_django.field()
    hvsync_inventory_endpoint_list: list[InventoryEndpointType] = strawberry_django.field()

    hvsync_hv_endpoint: HvEndpointType = strawberry_django.field()
    hvsync_hv_endpoint_list: list[HvEndpointType] = strawberry_django.field()

    hvsync_hv_cluster: HvClusterType = strawberry_django.field()
    hvsync_hv_cluster_list: list[HvClusterType] = strawberry_django.field()

    hvsync_hv_node: HvNodeType = strawberry_django.field()
    hvsync_hv_node_list: list[HvNodeType] = strawberry_django.field()

    hvsync_hv_storage: HvStorageType = strawberry_django.field()
    hvsync_hv_storage_list: list[HvStorageType] = strawberry_django.field()

    hvsync_hv_backup: HvBackupType = strawberry_django.field()
    hvsync_hv_backup_list: list[HvBackupType] = strawberry_django.field()

    hvsync_hv_snapshot: HvSnapshotType = strawberry_django.field()
    hvsync_hv_snapshot_list: list[HvSnapshotType] = strawberry_django.field()

    hvsync_hv_task_history: HvTaskHistoryType = strawberry_django.field()
    hvsync_hv_task_history_list: list[HvTaskHistoryType] = strawberry_django.field()

    hvsync_backup_routine: BackupRoutineType = strawberry_django.field()
    hvsync_backup_routine_list: list[BackupRoutineType] = strawberry_django.field()

    hvsync_replication: ReplicationType = strawberry_django.field()
    hvsync_replication_list: list[ReplicationType] = strawberry_django.field()

    hvsync_deletion_request: DeletionRequestType = strawberry_django.field()
    hvsync_deletion_request_list: list[DeletionRequestType] = strawberry_django.field()

    hvsync_apply_job: ApplyJobType = strawberry_django.field()
    hvsync_apply_job_list: list[ApplyJobType] = strawberry_django.field()

    hvsync_synced_virtual_machine: SyncedVirtualMachineType = strawberry_django.field()
    hvsync_synced_virtual_machine_list: list[SyncedVirtualMachineType] = strawberry_django.field()

    hvsync_synced_device: SyncedDeviceType = strawberry_django.field()
    hvsync_synced_device_list: list[SyncedDeviceType] = strawberry_django.field()

    hvsync_synced_interface: SyncedInterfaceType = strawberry_django.field()
    hvsync_synced_interface_list: list[SyncedInterfaceType] = strawberry_django.field()

    hvsync_synced_virtual_disk: SyncedVirtualDiskType = strawberry_django.field()
    hvsync_synced_virtual_disk_list: list[SyncedVirtualDiskType] = strawberry_django.field()

    hvsync_synced_ip_address: SyncedIPAddressType = strawberry_django.field()
    hvsync_synced_ip_address_list: list[SyncedIPAddressType] = strawberry_django.field()

    hvsync_synced_vlan: SyncedVLANType = strawberry_django.field()
    hvsync_synced_vlan_list: list[SyncedVLANType] = strawberry_django.field()

    hvsync_synced_prefix: SyncedPrefixType = strawberry_django.field()
    hvsync_synced_prefix_list: list[SyncedPrefixType] = strawberry_django.field()


schema = [HvsyncQuery]
