"""NetBox lookups a sync job needs: which cluster owns an object, and a VM's Proxmox VMID.

`ClusterLookups` answers `rules.scope.ClusterLookups` (SPEC 4.5 "Selected-objects job", item 4) from
NetBox and the plugin's cluster records; `vm_vmid` reads the VM's sync-state sidecar, else the
`hvsync_key` custom field the backend writes (its format is wire data: `wire.keys`).
"""

from __future__ import annotations

from typing import Any

from netbox_hvsync.models import (
    HvBackup,
    HvCluster,
    HvSnapshot,
    HvStorage,
    HvTaskHistory,
    SyncedVirtualMachine,
)
from netbox_hvsync.wire.keys import KEY_FIELD, parse_key
from virtualization.models import VirtualMachine


class ClusterLookups:
    """rules.scope.ClusterLookups answered from NetBox and the plugin's cluster records."""

    def vm_cluster(self, vm_id: int) -> int | None:
        return VirtualMachine.objects.filter(pk=vm_id).values_list("cluster_id", flat=True).first()

    def storage_cluster(self, storage_id: int) -> int | None:
        return HvStorage.objects.filter(pk=storage_id).values_list("cluster__cluster_id", flat=True).first()

    def backup_storage(self, backup_id: int) -> int | None:
        return HvBackup.objects.filter(pk=backup_id).values_list("storage_id", flat=True).first()

    def snapshot_vm(self, snapshot_id: int) -> int | None:
        return HvSnapshot.objects.filter(pk=snapshot_id).values_list("virtual_machine_id", flat=True).first()

    def task_vm(self, task_id: int) -> int | None:
        return HvTaskHistory.objects.filter(pk=task_id).values_list("virtual_machine_id", flat=True).first()

    def cluster_claimants(self, cluster_id: int) -> list[int]:
        return list(
            HvCluster.objects.filter(cluster_id=cluster_id).values_list("endpoint_id", flat=True).distinct()
        )


def vm_vmid(vm: Any) -> int | None:
    """The Proxmox VMID of a NetBox VM: its sync-state sidecar, else the backend's `hvsync_key` custom
    field (`<endpoint>|vm|<vmid>`), which the engine still keys core objects with."""
    vmid = (
        SyncedVirtualMachine.objects.filter(virtual_machine_id=vm.pk).values_list("vmid", flat=True).first()
    )
    if vmid is not None:
        return int(vmid)
    parsed = parse_key(str((vm.custom_field_data or {}).get(KEY_FIELD) or ""))
    if (
        parsed is not None
        and parsed[0] == "vm"
        and parsed[1]["vmid"].isascii()
        and parsed[1]["vmid"].isdigit()
    ):
        return int(parsed[1]["vmid"])
    return None
