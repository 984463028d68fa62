"""What one `hvsync-backend sync` invocation runs: stage streams, the full update, or selected objects.

Names are the backend's stage slugs (shared wire data) plus a few short aliases; stages always run in the
pipeline's order, because later stages link to what earlier ones wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hvsync_backend import wire
from hvsync_backend.terminal.config import ConfigError

ALIASES = {
    "clusters": "devices",
    "nodes": "devices",
    "vms": "virtual-machines",
    "tasks": "task-history",
    "disks": "vm-disks",
    "backups": "vm-backups",
    "snapshots": "vm-snapshots",
    "node-interfaces": "network-interfaces",
    "ips": "ip-addresses",
}
FULL_NAMES = ("full", "all", "full-update")


@dataclass(frozen=True)
class Run:
    """One request: a stage or full-update stream (`stream=True`) or a selected-object POST."""

    name: str
    route: str
    stream: bool
    params: dict[str, str] = field(default_factory=dict)


def stage_slugs(names: list[str]) -> list[str]:
    """Stage slugs for the given names and aliases, deduplicated, in pipeline order."""
    wanted: set[str] = set()
    for name in names:
        slug = ALIASES.get(name.lower(), name.lower())
        if slug not in wire.STAGE_ROUTES:
            known = ", ".join([*wire.STAGE_SLUGS, *ALIASES])
            raise ConfigError(f"unknown stage {name[:64]!r}; one of: {known}, or full")
        wanted.add(slug)
    return [slug for slug in wire.STAGE_SLUGS if slug in wanted]


def _endpoint(kind: str, value: str) -> tuple[str, str]:
    """Split `<endpoint>:<rest>`; the endpoint is the backend id of a Proxmox endpoint."""
    endpoint, sep, rest = value.partition(":")
    if not sep or not endpoint.isdecimal() or not endpoint.isascii():
        raise ConfigError(f"--{kind} expects <endpoint id>:..., got {value[:100]!r}")
    return endpoint, rest


def selected(kind: str, value: str) -> Run:
    """A selected-object run: `--vm 1:100`, `--node 1:pve1`, `--storage 1:local`, `--cluster 1`,
    `--backup 1:100:<volid>`, `--snapshot 1:100[:name]`, `--task 1:<upid or vmid>`."""
    if kind == "cluster":
        endpoint, rest = _endpoint(kind, value if ":" in value else value + ":")
        params: dict[str, str] = {}
    else:
        endpoint, rest = _endpoint(kind, value)
        if not rest:
            raise ConfigError(f"--{kind} {value[:100]!r}: nothing after the endpoint id")
        if kind == "vm":
            params = {"vmid": rest}
        elif kind in ("node", "storage"):
            params = {kind: rest}
        elif kind == "backup":
            vmid, sep, volid = rest.partition(":")
            if not sep or not volid:
                raise ConfigError("--backup expects <endpoint>:<vmid>:<volid>")
            params = {"vmid": vmid, "volid": volid}
        elif kind == "snapshot":
            vmid, _, name = rest.partition(":")
            params = {"vmid": vmid, **({"name": name} if name else {})}
        elif kind == "task-history":
            params = {"vmid": rest} if rest.isdecimal() else {"upid": rest}
        else:  # pragma: no cover - argparse offers only the kinds above
            raise ConfigError(f"unknown selected-object kind {kind!r}")
    route = wire.SELECTED_KINDS[kind].route
    label = f"{kind} {value}"
    return Run(label, route, stream=False, params={"hv_endpoint_ids": endpoint, **params})


def build(names: list[str], full: bool, selections: list[tuple[str, str]]) -> list[Run]:
    """The runs of one invocation; refuses an empty or mixed request."""
    names = [n for n in names if n]
    if any(n.lower() in FULL_NAMES for n in names):
        if len(names) > 1:
            raise ConfigError("`full` runs every stage; do not name stages with it")
        full, names = True, []
    if full and (names or selections):
        raise ConfigError("--all runs every stage; do not name stages or objects with it")
    if full:
        return [Run("full-update", wire.FULL_UPDATE_ROUTE, stream=True)]
    runs = [Run(slug, wire.STAGE_ROUTES[slug], stream=True) for slug in stage_slugs(names)]
    runs += [selected(kind, value) for kind, value in selections]
    if not runs:
        raise ConfigError("nothing to run: name stages (e.g. `sync vms`), --all, or an object (--vm 1:100)")
    return runs
