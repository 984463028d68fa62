"""Composite Proxmox reads for local reconciliation: cluster firewall and VM/container templates.

Each reader takes one endpoint's :class:`ProxmoxClient` and returns plain JSON. A Proxmox failure of any
sub-read raises the client's :class:`ProxmoxError`, so the whole endpoint is reported as failed (never a
half-read firewall). Sub-reads of one endpoint run concurrently, bounded by ``SUB_READ_CONCURRENCY``.
Answers pass through ``redact`` (credential-named keys such as a guest's ``cipassword``, and the
endpoint's own secrets), because these bodies go to NetBox job data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from hvsync_backend.hv.client import ProxmoxClient
from hvsync_backend.hv.errors import ProxmoxHTTPError
from hvsync_backend.inventory.errors import redact
from hvsync_backend.wire.numbers import decimal

SUB_READ_CONCURRENCY = 8
FIREWALL = "/cluster/firewall"
GUEST_TYPES = ("qemu", "lxc")

Reader = Callable[[ProxmoxClient], Awaitable[Any]]


def _rows(client: ProxmoxClient, path: str, value: Any) -> list[dict[str, Any]]:
    """A Proxmox list answer; anything else is an unreadable body for that path."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProxmoxHTTPError(client.target.label, f"GET {path}: expected a list of objects", 200)
    return value


def _mapping(client: ProxmoxClient, path: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProxmoxHTTPError(client.target.label, f"GET {path}: expected an object", 200)
    return value


async def _bounded[T](calls: list[Callable[[], Awaitable[T]]]) -> list[T]:
    sem = asyncio.Semaphore(SUB_READ_CONCURRENCY)

    async def run(call: Callable[[], Awaitable[T]]) -> T:
        async with sem:
            return await call()

    return list(await asyncio.gather(*(run(c) for c in calls)))


def _seg(value: Any) -> str:
    """One path segment: a name Proxmox returned is never allowed to reach another path."""
    return quote(str(value), safe="")


def _secrets(client: ProxmoxClient) -> tuple[str, ...]:
    return tuple(s for s in (client.target.token_value, client.target.password) if s)


async def read_firewall(client: ProxmoxClient) -> dict[str, Any]:
    """Cluster firewall: options, security groups with their rules, cluster rules, aliases, ipsets with entries."""

    async def rows(path: str) -> list[dict[str, Any]]:
        return _rows(client, path, await client.get(path))

    async def options() -> dict[str, Any]:
        return _mapping(client, f"{FIREWALL}/options", await client.get(f"{FIREWALL}/options"))

    opts, groups, rules, aliases, ipsets = await asyncio.gather(
        options(),
        rows(f"{FIREWALL}/groups"),
        rows(f"{FIREWALL}/rules"),
        rows(f"{FIREWALL}/aliases"),
        rows(f"{FIREWALL}/ipset"),
    )

    def member(path: str) -> Callable[[], Awaitable[list[dict[str, Any]]]]:
        return lambda: rows(path)

    group_rules = await _bounded([member(f"{FIREWALL}/groups/{_seg(g.get('group'))}") for g in groups])
    entries = await _bounded([member(f"{FIREWALL}/ipset/{_seg(s.get('name'))}") for s in ipsets])
    data = {
        "options": opts,
        "groups": [{**g, "rules": r} for g, r in zip(groups, group_rules, strict=True)],
        "rules": rules,
        "aliases": aliases,
        "ipsets": [{**s, "entries": e} for s, e in zip(ipsets, entries, strict=True)],
    }
    return redact(data, _secrets(client))


async def read_datacenter_options(client: ProxmoxClient) -> dict[str, Any]:
    """Datacenter options (``/cluster/options``)."""
    value = _mapping(client, "/cluster/options", await client.get("/cluster/options"))
    return redact(value, _secrets(client))


async def read_templates(client: ProxmoxClient) -> list[dict[str, Any]]:
    """QEMU VMs and LXC containers marked ``template: 1``, each with node, vmid, type, name and config."""
    resources = _rows(client, "/cluster/resources", await client.get("/cluster/resources", {"type": "vm"}))
    found = sorted(
        (
            r
            for r in resources
            if str(r.get("template", 0)) in ("1", "True", "true")
            and r.get("type") in GUEST_TYPES
            and r.get("node")
            and decimal(str(r.get("vmid", ""))) is not None
        ),
        key=lambda r: int(str(r["vmid"]).strip()),
    )

    def config_of(row: dict[str, Any]) -> Callable[[], Awaitable[dict[str, Any]]]:
        path = f"/nodes/{_seg(row['node'])}/{row['type']}/{int(str(row['vmid']).strip())}/config"

        async def read() -> dict[str, Any]:
            return _mapping(client, path, await client.get(path))

        return read

    configs = await _bounded([config_of(r) for r in found])
    data = [
        {
            "node": row["node"],
            "vmid": int(str(row["vmid"]).strip()),
            "type": row["type"],
            "name": config.get("name") or config.get("hostname") or row.get("name"),
            "config": config,
        }
        for row, config in zip(found, configs, strict=True)
    ]
    return redact(data, _secrets(client))


def read_guest(vmid: int) -> Reader:
    """Whether guest ``vmid`` exists (``/cluster/resources?type=vm``) and, when it does, its node, type and
    the keys of its config (``scsi0``, ``net0``, ...), never their values: the plugin re-checks a deletion
    request with it (issue 40), for a guest, one of its disks or one of its interfaces."""

    async def read(client: ProxmoxClient) -> dict[str, Any]:
        resources = _rows(
            client, "/cluster/resources", await client.get("/cluster/resources", {"type": "vm"})
        )
        row = next(
            (
                r
                for r in resources
                if r.get("type") in GUEST_TYPES and decimal(str(r.get("vmid", ""))) == vmid
            ),
            None,
        )
        if row is None or not row.get("node"):
            return {"vmid": vmid, "exists": False, "node": None, "type": None, "config_keys": []}
        path = f"/nodes/{_seg(row['node'])}/{row['type']}/{vmid}/config"
        try:
            config = _mapping(client, path, await client.get(path))
        except ProxmoxHTTPError as exc:
            if exc.status not in (404, 500):
                raise
            # destroyed between the two reads: Proxmox answers 500 "does not exist" for a missing config
            return {"vmid": vmid, "exists": False, "node": None, "type": None, "config_keys": []}
        keys = sorted(k for k in config if k != "digest")
        return {"vmid": vmid, "exists": True, "node": row["node"], "type": row["type"], "config_keys": keys}

    return read
