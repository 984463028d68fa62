"""A run of the backend's stages without NetBox: the real emulator as Proxmox, NetBox as a small store.

`MemoryNetBox` answers the calls the stages make (`list_all`, `prefetch`, `bulk_create`, `bulk_update`,
`bulk_delete`) and records every write, so a test can assert on what a stage would send to NetBox. It
filters reads by the managed tag, `slug`, `id` and `endpoint_id` only: enough for the desired-state
builders and the write plans, not a model of NetBox.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from hvsync_backend.endpoints.service import HvTarget
from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.sync.options import SyncOptions
from hvsync_backend.sync.proxmox import HvSource
from hvsync_backend.sync.run import SyncContext

#: fields NetBox answers as nested objects (`{"id": ...}`) although they are written as ids
NESTED = frozenset(
    {
        "site",
        "cluster",
        "type",
        "group",
        "role",
        "tenant",
        "platform",
        "device",
        "device_type",
        "manufacturer",
        "virtual_machine",
        "vlan",
        "untagged_vlan",
        "primary_ip4",
        "primary_ip6",
        "parent",
        "bridge",
        "lag",
        "endpoint",
        "node",
        "storage",
        "fleecing_storage",
        "hv_node",
        "scope",
        "vrf",
    }
)


def as_read(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as NetBox's REST API answers it: foreign keys nested, tagged VLANs as objects, and an
    interface's written `mac_address` as its primary MAC address object (NetBox 4.2 and later)."""
    out = dict(row)
    if "mac_address" in out:
        mac = out.pop("mac_address")
        out["primary_mac_address"] = {"mac_address": mac} if mac else None
    for name, value in row.items():
        if name in NESTED and isinstance(value, int) and not isinstance(value, bool):
            out[name] = {"id": value}
        elif name in ("tagged_vlans", "nodes") and isinstance(value, list):
            out[name] = [{"id": v} if isinstance(v, int) else v for v in value]
    return out


class MemoryNetBox:
    def __init__(self) -> None:
        self.rows: dict[str, dict[int, dict[str, Any]]] = {}
        self.writes: list[tuple[str, str, dict[str, Any]]] = []
        #: (update or delete, path, the parents the stage named for grouping)
        self.parents: list[tuple[str, str, Any]] = []
        self._ids = itertools.count(1)

    def prefetch(self, path: str, params: dict[str, Any] | None = None, **_: Any) -> None:
        return None

    async def list_all(
        self, path: str, params: dict[str, Any] | None = None, **_: Any
    ) -> list[dict[str, Any]]:
        params = params or {}
        out = []
        for row in self.rows.get(path, {}).values():
            if "tag" in params and params["tag"] not in {t["slug"] for t in row.get("tags", [])}:
                continue
            if "slug" in params and row.get("slug") != params["slug"]:
                continue
            if "id" in params and row["id"] not in set(params["id"]):
                continue
            if "endpoint_id" in params and row.get("endpoint") != params["endpoint_id"]:
                continue
            out.append(as_read(row))
        return out

    async def bulk_create(self, path: str, items: Iterable[dict[str, Any]]) -> list[Any]:
        created = []
        for item in items:
            row = {**item, "id": next(self._ids)}
            self.rows.setdefault(path, {})[row["id"]] = row
            self.writes.append(("create", path, item))
            created.append(row)
        return created

    async def bulk_update(self, path: str, items: Iterable[dict[str, Any]], parents: Any = None) -> list[Any]:
        self.parents.append(("update", path, parents))
        out = []
        for item in items:
            self.rows[path][item["id"]].update(item)
            self.writes.append(("update", path, item))
            out.append(self.rows[path][item["id"]])
        return out

    async def bulk_delete(self, path: str, ids: Iterable[int], parents: Any = None) -> list[Any]:
        self.parents.append(("delete", path, parents))
        out = []
        for pk in ids:
            self.rows[path].pop(pk)
            self.writes.append(("delete", path, {"id": pk}))
            out.append(None)
        return out


def emu_target(emu: Any, methods: tuple[str, ...] = ("token",), **kw: Any) -> HvTarget:
    """The running emulator as a backend hv endpoint target (token or password login)."""
    user, token_name = emu.token_id.split("!", 1)
    base: dict[str, Any] = dict(
        id=1,
        name="emu (inv:1)",
        host=emu.host,
        port=emu.port,
        scheme=emu.url.split(":")[0],
        api_url=emu.api_url,
        username=user,
        token_name=token_name,
        access_methods=tuple(methods),
        verify_ssl=emu.verify,
        enabled=True,
        allow_template_builds=False,
        timeout=15.0,
        max_retries=1,
        retry_backoff=0.05,
        password=emu.password,
        token_value=emu.token_secret,
    )
    base.update(kw)
    return HvTarget(**base)


def emulator_source(emu: Any) -> HvSource:
    """The emulator as one Proxmox endpoint of a run, read through the backend's own client."""
    target = emu_target(emu)
    return HvSource(target.id, target.name, ProxmoxClient(target), site_slug="proxmox-ve")


def run_context(source: HvSource, netbox: MemoryNetBox, **options: Any) -> SyncContext:
    async def emit(event: str, data: dict[str, Any]) -> None:
        return None

    return SyncContext(netbox=netbox, sources=[source], options=SyncOptions(**options), emit=emit)  # type: ignore[arg-type]
