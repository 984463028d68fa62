"""Typed sync-state sidecars (the plugin's `synced-*` models): the identity of the core NetBox objects
hvsync writes (devices, VMs, interfaces, disks, IP addresses, VLANs, prefixes).

A sidecar links one core object to its Proxmox identity (plugin hv endpoint + vmid / node / slot...).
The engine reads them before the core objects and trusts them over the `hvsync_key` custom field, which
stays as a readable mirror (and the key of objects older releases wrote without a sidecar, which are
adopted: they get their sidecar on the next run). Sidecars are written only when one of their fields
changes, so a no-change resync still writes nothing: the stored `last_seen` and `last_run_id` are the
time and run of the last sync that created or changed the sidecar; the plugin answers `last_seen` as the
endpoint's last complete read while the object is present (docs/sync.md, "Seen, and gone").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from hvsync_backend.inventory.errors import NetBoxError, NetBoxHTTPError
from hvsync_backend.sync.plan import Desired, diff_fields
from hvsync_backend.sync.plugin_endpoints import PLUGIN_API, plugin_endpoints
from hvsync_backend.sync.run import Counts, SidecarState, SyncContext
from hvsync_backend.wire.keys import format_key

#: rows are read per endpoint (`endpoint_id=`), so the nested endpoint is never serialised (~30% of a read);
#: `gone_since` says whether the object is marked gone from Proxmox (sync/gone.py)
COMMON_READ = ("id", "gone_since")

KeyOf = Callable[[str, Mapping[str, Any]], str | None]


@dataclass(frozen=True)
class SidecarSpec:
    """How one kind's core objects map to a sidecar model."""

    path: str
    #: the sidecar's one-to-one field naming the core object
    link: str
    #: fields read (kinds sharing a sidecar model read the same fields, so one list read serves both)
    read: tuple[str, ...]
    #: (endpoint identity, sidecar row) -> the engine's identity key, or None if not this kind's row
    key_of: KeyOf
    #: selected-VM runs read only the selected VMIDs' sidecars
    by_vmid: bool = False
    #: selected-VM runs read only the sidecars of the addresses those VMs report
    by_address: bool = False


class Kind(Protocol):
    """What sidecars need of a stage kind (`framework.Kind`): its name, sidecar model and scope."""

    name: str
    sidecar: SidecarSpec | None
    vm_scoped: bool

    def accepts(self, key: str) -> bool: ...


def nested_id(value: Any) -> int | None:
    if isinstance(value, Mapping):
        return int(value["id"]) if value.get("id") is not None else None
    return int(value) if isinstance(value, int) else None


def _vm(identity: str, row: Mapping[str, Any]) -> str | None:
    return format_key("vm", endpoint=identity, vmid=row["vmid"]) if row.get("vmid") is not None else None


def subnet_cidr(subnet: str) -> str:
    """Proxmox SDN subnet id (`<zone>-<address>-<prefixlen>`) -> CIDR; a CIDR is returned as is."""
    if "/" in subnet:
        return subnet
    rest = subnet.split("-", 1)[1] if "-" in subnet else subnet
    address, _, length = rest.rpartition("-")
    return f"{address}/{length}" if address else rest


_IFACE_READ = (*COMMON_READ, "vm_interface", "interface", "vmid", "node_name", "key")
_VLAN_READ = (*COMMON_READ, "vlan", "zone", "vnet")
GUEST_VLAN_PREFIX = "vid:"

VIRTUAL_MACHINE = SidecarSpec(
    f"{PLUGIN_API}/synced-virtual-machines",
    "virtual_machine",
    (*COMMON_READ, "virtual_machine", "vmid", "vm_type", "node_name", "is_template", "cluster"),
    _vm,
    by_vmid=True,
)
DEVICE = SidecarSpec(
    f"{PLUGIN_API}/synced-devices",
    "device",
    (*COMMON_READ, "device", "node_name"),
    lambda i, r: format_key("node", endpoint=i, node=r["node_name"]) if r.get("node_name") else None,
)
VM_INTERFACE = SidecarSpec(
    f"{PLUGIN_API}/synced-interfaces",
    "vm_interface",
    _IFACE_READ,
    lambda i, r: (
        format_key("vm_interface", endpoint=i, vmid=r["vmid"], slot=r["key"])
        if _vm(i, r) and r.get("key")
        else None
    ),
    by_vmid=True,
)
NODE_INTERFACE = SidecarSpec(
    f"{PLUGIN_API}/synced-interfaces",
    "interface",
    _IFACE_READ,
    lambda i, r: (
        format_key("node_interface", endpoint=i, node=r["node_name"], iface=r["key"])
        if r.get("node_name") and r.get("key")
        else None
    ),
)
VIRTUAL_DISK = SidecarSpec(
    f"{PLUGIN_API}/synced-virtual-disks",
    "virtual_disk",
    (*COMMON_READ, "virtual_disk", "vmid", "key"),
    lambda i, r: (
        format_key("vm_disk", endpoint=i, vmid=r["vmid"], slot=r["key"])
        if _vm(i, r) and r.get("key")
        else None
    ),
    by_vmid=True,
)
IP_ADDRESS = SidecarSpec(
    f"{PLUGIN_API}/synced-ip-addresses",
    "ip_address",
    (*COMMON_READ, "ip_address", "vmid", "interface_key", "address"),
    lambda i, r: (
        format_key("ip_address", endpoint=i, address=str(r["address"]).split("/")[0])
        if r.get("address")
        else None
    ),
    by_address=True,
)
#: VLANs guests use (NIC tags) have no SDN vnet: their sidecar's vnet is `vid:<vid>` (never a valid
#: Proxmox vnet id) and their zone is blank.
GUEST_VLAN = SidecarSpec(
    f"{PLUGIN_API}/synced-vlans",
    "vlan",
    _VLAN_READ,
    lambda i, r: (
        format_key("vlan", endpoint=i, vid=str(r["vnet"]).removeprefix(GUEST_VLAN_PREFIX))
        if str(r.get("vnet") or "").startswith(GUEST_VLAN_PREFIX)
        else None
    ),
)
SDN_VLAN = SidecarSpec(
    f"{PLUGIN_API}/synced-vlans",
    "vlan",
    _VLAN_READ,
    lambda i, r: (
        format_key("sdn_vnet", endpoint=i, vnet=r["vnet"])
        if r.get("vnet") and not str(r["vnet"]).startswith(GUEST_VLAN_PREFIX)
        else None
    ),
)
PREFIX = SidecarSpec(
    f"{PLUGIN_API}/synced-prefixes",
    "prefix",
    (*COMMON_READ, "prefix", "vnet", "subnet"),
    lambda i, r: (
        format_key("sdn_subnet", endpoint=i, vnet=r["vnet"], cidr=subnet_cidr(str(r["subnet"])))
        if r.get("vnet") and r.get("subnet")
        else None
    ),
)


async def endpoint_pks(ctx: SyncContext) -> dict[int, int]:
    """Backend endpoint id -> the plugin's hv endpoint pk. Endpoints without one are reported once per
    run (their objects keep being found by `hvsync_key`, without sidecars)."""
    try:
        return await plugin_endpoints(ctx)
    except NetBoxHTTPError as exc:
        if exc.status != 404:
            raise
        if not ctx.lookups.no_plugin_reported:
            ctx.lookups.no_plugin_reported = True
            problem = {
                **exc.as_problem("hvsync plugin"),
                "detail": "the hvsync plugin is not installed in NetBox; sync-state sidecars skipped",
            }
            await ctx.problem(problem, "hvsync plugin not installed: no sync-state sidecars")
        return {}


#: most addresses one sidecar read names (each is a query parameter, and gunicorn limits a request
#: line to 4 KiB); a selection reporting more reads the endpoint's address sidecars whole
ADDRESS_FILTER_MAX = 40


def read_params(ctx: SyncContext, kind: Kind, pk: int) -> dict[str, Any]:
    params: dict[str, Any] = {"endpoint_id": pk}
    spec = kind.sidecar
    assert spec is not None
    if ctx.options.only_vmids is None:
        return params
    if spec.by_vmid and kind.vm_scoped:
        params["vmid"] = sorted(ctx.options.only_vmids)
    elif spec.by_address:
        # Selected VMs: the sidecars of the addresses they report, whatever prefix length each was
        # stored with (a sidecar keeps the address as Proxmox last reported it); not every address
        # sidecar of the endpoint, which made a one-VM change read 5,000 rows in a 5,000-VM cluster.
        hosts = sorted({s.address.split("/")[0] for seen in (ctx.ip.sightings or {}).values() for s in seen})
        if 0 < len(hosts) <= ADDRESS_FILTER_MAX:
            params["address__isw"] = [f"{host}/" for host in hosts]
    return params


async def prefetch(ctx: SyncContext, kind: Kind) -> None:
    """Start the sidecar reads as soon as the plugin endpoints are known (background work)."""
    try:
        pks = await endpoint_pks(ctx)
    except NetBoxError:
        return  # reported by the stage that needs them
    if kind.sidecar is not None:
        for pk in sorted(set(pks.values())):
            ctx.netbox.prefetch(
                kind.sidecar.path, read_params(ctx, kind, pk), fields=kind.sidecar.read, flat=True
            )


async def read(ctx: SyncContext, kind: Kind) -> dict[str, SidecarState]:
    """This kind's sidecars within the run's endpoints, keyed by identity key."""
    spec = kind.sidecar
    if spec is None:
        return {}
    pks = await endpoint_pks(ctx)
    identity = {pks[s.backend_id]: s.identity for s in ctx.sources if s.backend_id in pks}
    pages = await asyncio.gather(
        *(
            ctx.netbox.list_all(spec.path, read_params(ctx, kind, pk), fields=spec.read, flat=True)
            for pk in identity
        )
    )
    out: dict[str, SidecarState] = {}
    for pk, rows in zip(identity, pages, strict=True):
        for row in rows:
            link_id = nested_id(row.get(spec.link))
            if link_id is None:
                continue  # a row of the other kind sharing this model (VM vs node interface)
            key = spec.key_of(identity[pk], row)
            if key and kind.accepts(key):
                out[key] = SidecarState(int(row["id"]), link_id, {**row, "endpoint": pk})
    ctx.lookups.sidecars[kind.name] = out
    return out


async def write(
    ctx: SyncContext, kind: Kind, desired: Mapping[str, Desired], ids: Mapping[str, int], part: Counts
) -> None:
    """Create missing sidecars and update changed ones for every desired object NetBox now holds."""
    spec = kind.sidecar
    if spec is None:
        return
    pks = await endpoint_pks(ctx)
    pk_of = {s.identity: pks[s.backend_id] for s in ctx.sources if s.backend_id in pks}
    states: dict[str, SidecarState] = ctx.lookups.sidecars.get(kind.name) or {}
    stamp = {"last_seen": datetime.now(UTC).isoformat(), "last_run_id": ctx.run_id}
    creates: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    labels: tuple[list[str], list[str]] = ([], [])
    for key, want in desired.items():
        pk, object_id = pk_of.get(ctx.source_of(key)), ids.get(key)
        if want.state is None or pk is None or object_id is None:
            continue
        body = {"endpoint": pk, spec.link: object_id, **want.state}
        have = states.get(key)
        if have is None:
            creates.append({**body, **stamp})
            labels[0].append(want.label)
        elif changes := diff_fields(body, have.data):
            updates.append({"id": have.id, **changes, **stamp})
            labels[1].append(want.label)
    if not creates and not updates:
        return
    created, updated = await asyncio.gather(
        ctx.netbox.bulk_create(spec.path, creates), ctx.netbox.bulk_update(spec.path, updates)
    )
    done = 0
    for label, result in [*zip(labels[0], created, strict=True), *zip(labels[1], updated, strict=True)]:
        if isinstance(result, NetBoxError):
            part.failed += 1
            await ctx.problem(result.as_problem(label), f"{kind.name} {label}: sync-state sidecar failed")
        else:
            done += 1
    await ctx.step(
        "write",
        f"{kind.name}: {done} sync-state sidecars written ({len(creates)} new, {len(updates)} changed)",
    )
