"""Scope and mode parameters shared by every stage route (names are the SPEC's wire names)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hvsync_backend.errors import FieldError
from hvsync_backend.sync.focus import Focus
from hvsync_backend.wire.numbers import decimal

_TRUE = {"1", "true", "yes", "on", "enabled", "enable", "always"}
_FALSE = {"0", "false", "no", "off", "disabled", "disable", "never"}
#: every spelling `parse_flag` accepts (compared case-insensitively)
FLAG_WORDS = tuple(sorted(_TRUE | _FALSE))
#: A netbox-branching schema id (8 lowercase alphanumerics there; any 1-64 of ASCII letters, digits, _ and -
#: here). ASCII only: it travels in the X-NetBox-Branch header, and `str.isalnum` accepts "é" and "²".
BRANCH_SCHEMA_ID_CHAR = r"[A-Za-z0-9_-]"
BRANCH_SCHEMA_ID_MAX = 64
BRANCH_SCHEMA_ID = re.compile(rf"{BRANCH_SCHEMA_ID_CHAR}{{1,{BRANCH_SCHEMA_ID_MAX}}}")
#: The default site's name: NetBox's limit (100), printable characters only.
SITE_NAME_MAX = 100


def parse_flag(field: str, value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise FieldError(field, f"expected one of enabled/disabled/true/false, got {value!r}")


def parse_ids(field: str, value: str | None) -> tuple[int, ...] | None:
    """Comma-separated backend ids; absent or empty means every endpoint."""
    if value is None or not value.strip():
        return None
    ids: list[int] = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        number = decimal(part, low=1, high=2**31 - 1)
        if number is None:
            raise FieldError(field, f"expected comma-separated integer ids (1-2147483647), got {part!r}")
        ids.append(number)
    return tuple(ids) or None


@dataclass(frozen=True)
class SyncOptions:
    """What a run may touch and how. `delete_stale` is the opt-in removal of vanished managed objects."""

    hv_endpoint_ids: tuple[int, ...] | None = None
    inventory_branch_schema_id: str | None = None
    sync_mode_vm: bool = True
    sync_mode_vm_template: bool = True
    dry_run: bool = False
    delete_stale: bool = False
    site_name: str = "Proxmox VE"
    #: Selected-object runs: only these guests (None: all); never deletes, ignores objects not selected.
    only_vmids: frozenset[int] | None = None
    partial: bool = False
    #: Selected-object runs: the one object (node, storage, backup, snapshot, task) and its dependencies.
    focus: Focus | None = None

    @classmethod
    def from_query(cls, query: dict[str, str], *, site_name: str = "Proxmox VE") -> SyncOptions:
        branch = (query.get("inventory_branch_schema_id") or "").strip() or None
        if branch is not None and not BRANCH_SCHEMA_ID.fullmatch(branch):
            raise FieldError(
                "inventory_branch_schema_id",
                "expected a branch schema id (1-64 of A-Z a-z 0-9 _ -)",
            )
        site = (query.get("site") or "").strip() or site_name
        if len(site) > SITE_NAME_MAX or not site.isprintable():
            raise FieldError("site", f"expected a site name of 1-{SITE_NAME_MAX} printable characters")
        return cls(
            hv_endpoint_ids=parse_ids("hv_endpoint_ids", query.get("hv_endpoint_ids")),
            inventory_branch_schema_id=branch,
            sync_mode_vm=parse_flag("sync_mode_vm", query.get("sync_mode_vm"), True),
            sync_mode_vm_template=parse_flag(
                "sync_mode_vm_template", query.get("sync_mode_vm_template"), True
            ),
            dry_run=parse_flag("dry_run", query.get("dry_run"), False),
            delete_stale=parse_flag("delete_stale", query.get("delete_stale"), False),
            site_name=site,
        )
