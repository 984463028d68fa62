"""virtual-machines: QEMU VMs and LXC containers as NetBox virtual machines.

`disk` is left to NetBox: it is the sum of the virtual disks the vm-disks stage writes (NetBox refuses a
VM disk size that differs from that sum).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hvsync_backend.sync import sidecars
from hvsync_backend.sync.framework import Kind, known_ids
from hvsync_backend.sync.guests import guests, vm_key, warm_guests, when_listed
from hvsync_backend.sync.plan import Desired
from hvsync_backend.sync.proxmox import Guest
from hvsync_backend.sync.run import MANAGED_TAG, SyncContext
from hvsync_backend.sync.stages.devices import ClusterKind, DeviceKind, cluster_key, node_key, site_id
from hvsync_backend.sync.stages.plugin_records import PluginClusterKind
from hvsync_backend.sync.support import ensure, ensure_tags, prefetch_support, slugify
from hvsync_backend.wire.keys import format_key, parse_key

ROLES = {"qemu": ("Virtual Machine", "pve-qemu"), "lxc": ("Container", "pve-lxc")}
TEMPLATE_TAG = "pve-template"
STATUS = {"running": "active", "stopped": "offline", "paused": "paused", "suspended": "paused"}


def vcpus(guest: Guest) -> float:
    cfg = guest.config
    if guest.kind == "qemu":
        if cfg.get("vcpus"):
            return float(cfg["vcpus"])
        if cfg.get("cores") or cfg.get("sockets"):
            return float(int(cfg.get("cores") or 1) * int(cfg.get("sockets") or 1))
    elif cfg.get("cores"):
        return float(cfg["cores"])
    return float(guest.maxcpu or 1)


def memory_mb(guest: Guest) -> int:
    if guest.config.get("memory"):
        return int(str(guest.config["memory"]).split(",")[0].removeprefix("current="))
    return guest.maxmem // (1024 * 1024)


def ostype_of(guest: Guest) -> str | None:
    return str(guest.config["ostype"]) if guest.config.get("ostype") else None


def platform_slug(ostype: str) -> str:
    return slugify(f"pve-{ostype}")


def ostypes(found: Iterable[Guest]) -> list[str]:
    """The OS types these guests report, each once: one NetBox platform each."""
    return sorted({ostype for g in found if (ostype := ostype_of(g))})


def platform_slugs(found: Iterable[Guest]) -> list[str]:
    return [platform_slug(ostype) for ostype in ostypes(found)]


def status(guest: Guest) -> str:
    if guest.template:
        return "offline"
    return STATUS.get(guest.status, "offline")


class VirtualMachineKind(Kind):
    vm_scoped = True
    name = "virtual machine"
    path = "virtualization/virtual-machines"
    sidecar = sidecars.VIRTUAL_MACHINE
    read_fields = (
        "name",
        "status",
        "cluster",
        "device",
        "site",
        "vcpus",
        "memory",
        "role",
        "platform",
        "tags",
    )

    def accepts(self, key: str) -> bool:
        parsed = parse_key(key)
        return parsed is not None and parsed[0] == "vm"

    def linked_kinds(self) -> tuple[Kind, ...]:
        return (ClusterKind(), DeviceKind(), PluginClusterKind())

    def prefetch(self, ctx: SyncContext) -> None:
        super().prefetch(ctx)
        prefetch_support(ctx, "dcim/device-roles", [slug for _, slug in ROLES.values()])
        warm_guests(ctx)
        when_listed(ctx, lambda found: prefetch_support(ctx, "dcim/platforms", platform_slugs(found)))

    async def desired(self, ctx: SyncContext) -> dict[str, Desired]:
        by_endpoint = await guests(ctx)
        cluster_ids = await known_ids(ctx, ClusterKind())
        device_ids = await known_ids(ctx, DeviceKind())
        hv_clusters = await known_ids(ctx, PluginClusterKind())
        roles = {
            kind: await ensure(
                ctx, "dcim/device-roles", slug, {"name": name, "vm_role": True, "color": "4caf50"}
            )
            for kind, (name, slug) in ROLES.items()
        }
        all_guests = [g for gs in by_endpoint.values() for g in gs]
        tag_names = {t for g in all_guests for t in g.tags} | {MANAGED_TAG}
        if any(g.template for g in all_guests):
            tag_names.add(TEMPLATE_TAG)
        tag_slugs = await ensure_tags(ctx, tag_names)
        platforms: dict[str, int | None] = {}
        for ostype in ostypes(all_guests):
            platforms[ostype] = await ensure(
                ctx, "dcim/platforms", platform_slug(ostype), {"name": f"Proxmox {ostype}"}
            )
        out: dict[str, Desired] = {}
        for source in ctx.sources:
            site = await site_id(ctx, source)
            for guest in by_endpoint.get(source.backend_id, []):
                key = vm_key(source, guest.vmid)
                tags = sorted(
                    {tag_slugs[t] for t in guest.tags}
                    | {MANAGED_TAG}
                    | ({TEMPLATE_TAG} if guest.template else set())
                )
                payload: dict[str, Any] = {
                    "name": guest.name,
                    "status": status(guest),
                    "cluster": cluster_ids.get(cluster_key(source)),
                    "device": device_ids.get(node_key(source, guest.node)),
                    "site": site,
                    "vcpus": vcpus(guest),
                    "memory": memory_mb(guest),
                    "role": roles[guest.kind],
                    "platform": platforms.get(str(guest.config.get("ostype"))),
                    "tags": [{"slug": s} for s in tags],
                }
                state = {
                    "vmid": guest.vmid,
                    "vm_type": guest.kind,
                    "node_name": guest.node,
                    "is_template": guest.template,
                    "cluster": hv_clusters.get(format_key("hv_cluster", endpoint=source.identity)),
                }
                out[key] = Desired(key, f"{guest.name} ({guest.kind} {guest.vmid})", payload, state)
        return out
