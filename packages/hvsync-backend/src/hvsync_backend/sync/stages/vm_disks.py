"""vm-disks: each guest disk (QEMU scsi/virtio/sata/ide, LXC rootfs/mpN) as a NetBox virtual disk."""

from __future__ import annotations

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.guests import guests, vm_key, warm_guests
from hvsync_backend.sync.parse import disks
from hvsync_backend.sync.plan import Desired
from hvsync_backend.sync.run import SyncContext
from hvsync_backend.sync.stages.virtual_machines import VirtualMachineKind
from hvsync_backend.wire.keys import format_key


class VirtualDiskKind(Kind):
    vm_scoped = True
    name = "virtual disk"
    path = "virtualization/virtual-disks"
    sidecar = sidecars.VIRTUAL_DISK
    read_fields = ("name", "size", "virtual_machine", "description")

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (VirtualMachineKind(),)

    def accepts(self, key: str) -> bool:
        return "|disk|" in key

    def prefetch(self, ctx: SyncContext) -> None:
        super().prefetch(ctx)
        warm_guests(ctx)

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        by_endpoint = await guests(ctx)
        vm_ids = await known_ids(ctx, VirtualMachineKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for guest in by_endpoint.get(source.backend_id, []):
                vm_id = vm_ids.get(vm_key(source, guest.vmid))
                if vm_id is None and not ctx.options.dry_run:
                    continue  # its VM failed or was not written: nothing may hang off it
                for disk in disks(guest.kind, guest.config):
                    key = format_key("vm_disk", endpoint=source.identity, vmid=guest.vmid, slot=disk.slot)
                    payload = {
                        "virtual_machine": vm_id,
                        "name": disk.slot,
                        "size": disk.size_mb,
                        "description": disk.volume[:200],
                    }
                    state = {"vmid": guest.vmid, "key": disk.slot}
                    out[key] = Desired(key, f"{guest.name} {disk.slot}", payload, state)
        return out
