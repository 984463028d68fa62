"""ip-addresses: addresses guests report (QEMU guest agent, LXC interfaces/static config), assigned to
the interface whose MAC reported them, and each VM's primary IPv4.

No stealing: an address is keyed per endpoint; if several interfaces report it, the interface that
already holds it in NetBox keeps it while it still reports it, else the lowest (vmid, slot) wins and the
conflict is reported. Addresses NetBox holds outside hvsync are never read as managed, so never taken.
"""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.guests import guests, vm_key, warm_guests
from hvsync_backend.sync.parse import Sighting, nics
from hvsync_backend.sync.plan import Current, Desired
from hvsync_backend.sync.proxmox import Guest, HvSource, ProxmoxReader
from hvsync_backend.sync.run import SyncContext
from hvsync_backend.sync.stages.virtual_machines import VirtualMachineKind
from hvsync_backend.sync.stages.vm_interfaces import VMInterfaceKind
from hvsync_backend.wire.keys import format_key, parse_key

VMINTERFACE = "virtualization.vminterface"


def normalise_address(text: str) -> str | None:
    """Canonical 'ip/prefix', or None for addresses not worth recording (loopback, link-local)."""
    try:
        iface = ipaddress.ip_interface(text.strip())
    except ValueError:
        return None
    ip = iface.ip
    if ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast:
        return None
    return f"{ip.compressed}/{iface.network.prefixlen}"


def _slot(iface_key: str) -> str:
    """The NIC slot a VM interface key ends with (`net0` of `ep1|vm|100|nic|net0`)."""
    parsed = parse_key(iface_key)
    if parsed is None or parsed[0] != "vm_interface":
        raise ValueError(f"not a VM interface key: {iface_key!r}")
    return parsed[1]["slot"]


def ip_key(source: HvSource, address: str) -> str:
    return format_key("ip_address", endpoint=source.identity, address=address.split("/")[0])


async def _guest_sightings(source: HvSource, reader: ProxmoxReader, guest: Guest) -> list[Sighting]:
    by_mac = {nic.mac: nic for nic in nics(guest.kind, guest.config) if nic.mac}
    out: list[Sighting] = []
    for mac, raw in await reader.guest_addresses(guest):
        nic = by_mac.get(mac.upper())
        address = normalise_address(raw)
        if nic and address:
            iface = format_key("vm_interface", endpoint=source.identity, vmid=guest.vmid, slot=nic.slot)
            out.append(Sighting(address, vm_key(source, guest.vmid), iface, (guest.vmid, int(nic.slot[3:]))))
    if not out and guest.kind == "lxc":
        for nic in nics(guest.kind, guest.config):
            for raw in nic.static_ips:
                address = normalise_address(raw)
                if address:
                    iface = format_key(
                        "vm_interface", endpoint=source.identity, vmid=guest.vmid, slot=nic.slot
                    )
                    out.append(
                        Sighting(address, vm_key(source, guest.vmid), iface, (guest.vmid, int(nic.slot[3:])))
                    )
    return out


async def sightings(ctx: SyncContext) -> dict[str, list[Sighting]]:
    """IP key -> every sighting of that address in scope (cached for the run)."""
    if ctx.ip.sightings is None:
        by_endpoint = await guests(ctx)

        async def read(source: HvSource, reader: ProxmoxReader) -> list[tuple[str, Sighting]]:
            lists = await asyncio.gather(
                *(_guest_sightings(source, reader, g) for g in by_endpoint.get(source.backend_id, []))
            )
            return [(ip_key(source, s.address), s) for found in lists for s in found]

        found = await ctx.per_endpoint(read)
        table: dict[str, list[Sighting]] = {}
        for pairs in found.values():
            for key, sighting in pairs:
                table.setdefault(key, []).append(sighting)
        ctx.ip.sightings = table
    return ctx.ip.sightings


class IPAddressKind(Kind):
    name = "ip address"
    path = "ipam/ip-addresses"
    read_fields = ("address", "status", "assigned_object_type", "assigned_object_id")
    sidecar = sidecars.IP_ADDRESS
    from_guests = True

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (VMInterfaceKind(),)

    def accepts(self, key: str) -> bool:
        return "|ip|" in key

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        if ctx.ip.desired is None:
            ctx.ip.desired = await self._desired(ctx)
        return ctx.ip.desired

    async def _desired(self, ctx: SyncContext) -> dict[str, Desired]:
        table = await sightings(ctx)
        iface_ids = await known_ids(ctx, VMInterfaceKind())
        holders = ctx.ip.current or await self.current(ctx)
        out: dict[str, Desired] = {}
        owners: dict[str, Sighting] = {}
        for key, seen in sorted(table.items()):
            seen = [s for s in seen if iface_ids.get(s.iface) is not None or ctx.options.dry_run]
            if not seen:
                continue
            held = holders.get(key)
            holder_id = held.data.get("assigned_object_id") if held else None
            owner = next((s for s in seen if iface_ids.get(s.iface) == holder_id), None)
            owner = owner or min(seen, key=lambda s: s.order)
            if len({s.iface for s in seen}) > 1:
                await ctx.step(
                    "object",
                    f"address {owner.address} is reported by {len(seen)} interfaces; kept on {owner.iface}",
                    object=owner.address,
                )
            owners[key] = owner
            payload: dict[str, Any] = {
                "address": owner.address,
                "status": "active",
                "assigned_object_type": VMINTERFACE,
                "assigned_object_id": iface_ids.get(owner.iface),
            }
            state = {
                "address": owner.address,
                "vmid": owner.order[0],
                "interface_key": _slot(owner.iface),
            }
            out[key] = Desired(key, owner.address, payload, state)
        ctx.ip.owners = owners
        return out

    def read_params(self, ctx: SyncContext) -> dict[str, Any]:
        params = super().read_params(ctx)
        if ctx.options.only_vmids is not None:
            # selected VMs: only the addresses they report (with whoever holds them now)
            table: dict[str, list[Sighting]] = ctx.ip.sightings or {}
            params["address"] = sorted({s.address for seen in table.values() for s in seen})
        return params

    def prefetch_current(self, ctx: SyncContext) -> None:
        if ctx.options.only_vmids is None:  # selected VMs read the addresses they report: not known yet
            super().prefetch_current(ctx)

    def prefetch(self, ctx: SyncContext) -> None:
        warm_guests(ctx, addresses=True)
        super().prefetch(ctx)

    async def current(self, ctx: SyncContext) -> dict[str, Current]:
        if ctx.ip.current is None:
            if ctx.options.only_vmids is not None:
                await sightings(ctx)
                if not ctx.ip.sightings:
                    ctx.ip.current = {}
                    return {}
            ctx.ip.current = await super().current(ctx)
        return ctx.ip.current


class PrimaryIPKind(Kind):
    """Sets primary_ip4 on managed VMs. `clearing` first releases primaries whose address moves away
    (NetBox refuses to reassign an address that is a primary IP)."""

    vm_scoped = True

    path = "virtualization/virtual-machines"
    read_fields = ("name", "primary_ip4")
    owns_objects = False
    sidecar = sidecars.VIRTUAL_MACHINE

    def __init__(self, clearing: bool) -> None:
        self.clearing = clearing
        self.name = "primary ip (release)" if clearing else "primary ip"

    def linked_kinds(self) -> tuple[Kind, ...]:
        # releasing compares the addresses' wanted interfaces with their holders; setting links VMs to them
        return (IPAddressKind(), VMInterfaceKind() if self.clearing else VirtualMachineKind())

    def accepts(self, key: str) -> bool:
        return VirtualMachineKind().accepts(key)

    def view(self, obj: Any) -> dict[str, Any]:
        ip = obj.get("primary_ip4")
        return {"primary_ip4": ip.get("id") if isinstance(ip, dict) else ip}

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        if self.clearing:
            return await self._releases(ctx)
        owners: dict[str, Sighting] = ctx.ip.owners
        ip_ids = await known_ids(ctx, IPAddressKind())
        vm_ids = await known_ids(ctx, VirtualMachineKind())
        first: dict[str, tuple[tuple[int, int], int]] = {}
        for key, owner in owners.items():
            ip_id = ip_ids.get(key)
            if ip_id is None or ":" in owner.address:
                continue
            if owner.vm not in first or owner.order < first[owner.vm][0]:
                first[owner.vm] = (owner.order, ip_id)
        by_endpoint = await guests(ctx)
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            for guest in by_endpoint.get(source.backend_id, []):
                key = vm_key(source, guest.vmid)
                if key in vm_ids:
                    chosen = first.get(key)
                    out[key] = Desired(key, guest.name, {"primary_ip4": chosen[1] if chosen else None})
        return out

    async def _releases(self, ctx: SyncContext) -> dict[str, Desired]:
        """VMs whose primary IPv4 is a managed address that this run moves to another VM."""
        ip_kind = IPAddressKind()
        wanted = await ip_kind.desired(ctx)
        holders = await ip_kind.current(ctx)
        vms = await self.current(ctx)
        moving_ids = {
            held.id
            for key, held in holders.items()
            if key in wanted
            and wanted[key].payload["assigned_object_id"] != held.data.get("assigned_object_id")
        }
        out: dict[str, Desired] = {}
        for key, vm in vms.items():
            if vm.data.get("primary_ip4") in moving_ids:
                out[key] = Desired(key, vm.label, {"primary_ip4": None})
        return out
