"""The 13 stages in pipeline order, with their stream routes (docs/sync.md lists them)."""

from __future__ import annotations

from hvsync_backend.sync.engine import Stage
from hvsync_backend.sync.stages.backups_tasks import BackupKind, TaskHistoryStage
from hvsync_backend.sync.stages.devices import ClusterKind, DeviceKind
from hvsync_backend.sync.stages.ip_addresses import IPAddressKind, PrimaryIPKind
from hvsync_backend.sync.stages.jobs import BackupRoutineKind, ReplicationKind
from hvsync_backend.sync.stages.network_interfaces import NodeInterfaceKind, NodeInterfaceLinkKind
from hvsync_backend.sync.stages.plugin_records import PluginClusterKind, PluginNodeKind, PluginStorageKind
from hvsync_backend.sync.stages.sdn import SDNSubnetKind, SDNVnetKind, SDNZoneKind
from hvsync_backend.sync.stages.virtual_machines import VirtualMachineKind
from hvsync_backend.sync.stages.vm_disks import VirtualDiskKind
from hvsync_backend.sync.stages.vm_interfaces import VLANGroupKind, VLANKind, VMInterfaceKind
from hvsync_backend.sync.stages.vm_snapshots import SnapshotKind

FULL_UPDATE_ROUTE = "/full-update/stream"


def build_stages() -> list[Stage]:
    """Every stage in order; plugin-model stages are appended by `plugin_stages` when available."""
    return [
        Stage("devices", "/dcim/devices/create/stream", [ClusterKind(), DeviceKind()], "Nodes and clusters"),
        Stage(
            "storage",
            "/plugins/hvsync/storage/create/stream",
            [PluginClusterKind(), PluginNodeKind(), PluginStorageKind()],
            "Plugin clusters, nodes and storage",
        ),
        Stage(
            "virtual-machines",
            "/virtualization/virtual-machines/create/stream",
            [VirtualMachineKind()],
            "Virtual machines",
        ),
        TaskHistoryStage("task-history", "/plugins/hvsync/task-history/create/stream", "Task history"),
        Stage(
            "vm-disks", "/virtualization/virtual-disks/create/stream", [VirtualDiskKind()], "Virtual disks"
        ),
        Stage("vm-backups", "/plugins/hvsync/backups/create/stream", [BackupKind()], "VM backups"),
        Stage("vm-snapshots", "/plugins/hvsync/snapshots/create/stream", [SnapshotKind()], "VM snapshots"),
        Stage(
            "network-interfaces",
            "/dcim/interfaces/create/stream",
            [NodeInterfaceKind(), NodeInterfaceLinkKind()],
            "Node interfaces",
        ),
        Stage(
            "vm-interfaces",
            "/virtualization/interfaces/create/stream",
            [VLANGroupKind(), VLANKind(), VMInterfaceKind()],
            "VM interfaces and VLANs",
        ),
        Stage(
            "ip-addresses",
            "/ipam/ip-addresses/create/stream",
            [PrimaryIPKind(clearing=True), IPAddressKind(), PrimaryIPKind(clearing=False)],
            "IP addresses",
        ),
        Stage("sdn", "/ipam/sdn/create/stream", [SDNZoneKind(), SDNVnetKind(), SDNSubnetKind()], "SDN"),
        Stage(
            "replications", "/plugins/hvsync/replications/create/stream", [ReplicationKind()], "Replications"
        ),
        Stage(
            "backup-routines",
            "/plugins/hvsync/backup-routines/create/stream",
            [BackupRoutineKind()],
            "Backup routines",
        ),
    ]


STAGES: list[Stage] = build_stages()
BY_SLUG: dict[str, Stage] = {s.slug: s for s in STAGES}
