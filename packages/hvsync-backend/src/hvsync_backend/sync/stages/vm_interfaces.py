"""vm-interfaces: guest NICs as VM interfaces with their MAC address and VLANs.

VLAN identity is (VLAN group, vid), never vid alone: each endpoint's cluster gets its own managed VLAN
group, so VLAN 10 of one cluster is never confused with VLAN 10 of another.
"""

from __future__ import annotations

from typing import Any

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.guests import guests, vm_key, warm_guests
from hvsync_backend.sync.parse import Nic, nics
from hvsync_backend.sync.plan import Desired
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.sync.reads import clusters
from hvsync_backend.sync.run import SyncContext
from hvsync_backend.sync.stages.devices import ClusterKind, cluster_key
from hvsync_backend.sync.stages.virtual_machines import VirtualMachineKind
from hvsync_backend.sync.support import slugify
from hvsync_backend.wire.keys import format_key


def group_key(source: HvSource) -> str:
    return format_key("vlan_group", endpoint=source.identity)


def vlan_key(source: HvSource, vid: int) -> str:
    return format_key("vlan", endpoint=source.identity, vid=vid)


def iface_key(source: HvSource, vmid: int, nic: Nic) -> str:
    return format_key("vm_interface", endpoint=source.identity, vmid=vmid, slot=nic.slot)


class VLANGroupKind(Kind):
    name = "vlan group"
    path = "ipam/vlan-groups"
    read_fields = ("name", "slug", "scope_type", "scope_id")
    from_guests = True

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (ClusterKind(),)

    def accepts(self, key: str) -> bool:
        return key.endswith("|vlangroup")

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        infos = await clusters(ctx)
        cluster_ids = await known_ids(ctx, ClusterKind())
        in_scope = await guests(ctx) if ctx.options.only_vmids is not None else None
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            info = infos.get(source.backend_id)
            if info is None or (in_scope is not None and not in_scope.get(source.backend_id)):
                continue  # a selected-VM run writes the group only for an endpoint holding its guest
            key = group_key(source)
            name = f"{info.name} VLANs ({source.identity})"
            payload = {
                "name": name,
                "slug": slugify(f"hvsync-{source.identity}-{info.name}"),
                "scope_type": "virtualization.cluster",
                "scope_id": cluster_ids.get(cluster_key(source)),
            }
            out[key] = Desired(key, name, payload)
        return out


class VLANKind(Kind):
    name = "vlan"
    path = "ipam/vlans"
    read_fields = ("vid", "name", "group", "status")
    sidecar = sidecars.GUEST_VLAN
    from_guests = True

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (VLANGroupKind(),)

    def accepts(self, key: str) -> bool:
        return "|vlan|" in key

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        by_endpoint = await guests(ctx)
        group_ids = await known_ids(ctx, VLANGroupKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            vids: set[int] = set()
            for guest in by_endpoint.get(source.backend_id, []):
                for nic in nics(guest.kind, guest.config):
                    vids.update(v for v in (nic.tag, *nic.trunks) if v)
            group = group_ids.get(group_key(source))
            for vid in sorted(vids):
                key = vlan_key(source, vid)
                payload = {"vid": vid, "name": f"VLAN {vid}", "group": group, "status": "active"}
                state = {"vnet": f"{sidecars.GUEST_VLAN_PREFIX}{vid}", "zone": ""}
                out[key] = Desired(key, f"VLAN {vid} ({source.identity})", payload, state)
        return out


class VMInterfaceKind(Kind):
    vm_scoped = True
    name = "vm interface"
    path = "virtualization/interfaces"
    sidecar = sidecars.VM_INTERFACE
    read_fields = (
        "name",
        "virtual_machine",
        "enabled",
        "mtu",
        "primary_mac_address",
        "mode",
        "untagged_vlan",
        "tagged_vlans",
        "description",
    )

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (VirtualMachineKind(), VLANKind())

    def accepts(self, key: str) -> bool:
        return "|nic|" in key

    def view(self, obj: Any) -> dict[str, Any]:
        data = dict(obj)
        mac = obj.get("primary_mac_address")
        data["mac_address"] = mac.get("mac_address") if isinstance(mac, dict) else None
        data["mode"] = obj.get("mode") or None
        return data

    def prefetch(self, ctx: SyncContext) -> None:
        super().prefetch(ctx)
        warm_guests(ctx)

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        by_endpoint = await guests(ctx)
        vm_ids = await known_ids(ctx, VirtualMachineKind())
        vlan_ids = await known_ids(ctx, VLANKind())
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for guest in by_endpoint.get(source.backend_id, []):
                vm_id = vm_ids.get(vm_key(source, guest.vmid))
                if vm_id is None and not ctx.options.dry_run:
                    continue
                for nic in nics(guest.kind, guest.config):
                    key = iface_key(source, guest.vmid, nic)
                    untagged = vlan_ids.get(vlan_key(source, nic.tag)) if nic.tag else None
                    tagged = sorted(i for i in (vlan_ids.get(vlan_key(source, v)) for v in nic.trunks) if i)
                    mode = "tagged" if tagged else ("access" if untagged else None)
                    payload: dict[str, Any] = {
                        "virtual_machine": vm_id,
                        "name": nic.name,
                        "enabled": nic.enabled,
                        "mtu": nic.mtu,
                        "mac_address": nic.mac,
                        "mode": mode,
                        "untagged_vlan": untagged,
                        "tagged_vlans": tagged,
                        "description": ", ".join(
                            p for p in (f"bridge {nic.bridge}" if nic.bridge else "", nic.model or "") if p
                        ),
                    }
                    state = {"vmid": guest.vmid, "key": nic.slot}
                    out[key] = Desired(key, f"{guest.name} {nic.name}", payload, state)
        return out
