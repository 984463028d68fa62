"""The 13 stages in pipeline order: the kinds each reconciles, under the slug, route and title that
contracts/wire/wire.json gives it (docs/sync.md lists them)."""

from __future__ import annotations

from hvsync_backend import wire
from hvsync_backend.sync.framework import Kind, Stage
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

FULL_UPDATE_ROUTE = wire.FULL_UPDATE_ROUTE


def stage_kinds() -> dict[str, list[Kind]]:
    """The kinds each stage reconciles, in order (task-history is its own `TaskHistoryStage`)."""
    return {
        "devices": [ClusterKind(), DeviceKind()],
        "storage": [PluginClusterKind(), PluginNodeKind(), PluginStorageKind()],
        "virtual-machines": [VirtualMachineKind()],
        "vm-disks": [VirtualDiskKind()],
        "vm-backups": [BackupKind()],
        "vm-snapshots": [SnapshotKind()],
        "network-interfaces": [NodeInterfaceKind(), NodeInterfaceLinkKind()],
        "vm-interfaces": [VLANGroupKind(), VLANKind(), VMInterfaceKind()],
        "ip-addresses": [PrimaryIPKind(clearing=True), IPAddressKind(), PrimaryIPKind(clearing=False)],
        "sdn": [SDNZoneKind(), SDNVnetKind(), SDNSubnetKind()],
        "replications": [ReplicationKind()],
        "backup-routines": [BackupRoutineKind()],
    }


def build_stages() -> list[Stage]:
    """Every stage in pipeline order; slugs, routes and titles are wire data shared with the plugin."""
    kinds = stage_kinds()
    return [
        TaskHistoryStage(s.slug, s.route, s.title)
        if s.slug == "task-history"
        else Stage(s.slug, s.route, kinds[s.slug], s.title)
        for s in wire.STAGES
    ]


STAGES: list[Stage] = build_stages()
BY_SLUG: dict[str, Stage] = {s.slug: s for s in STAGES}
