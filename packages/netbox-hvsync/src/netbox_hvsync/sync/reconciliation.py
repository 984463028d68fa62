"""Local reconciliation of a sync job (SPEC 1.B.3, 4.5 step 7): cluster, nodes, firewall, datacenter
options and VM templates, read through the job's backend with its backend ids (never a Proxmox URL).

What is kept in job data is a per-part, per-endpoint summary an administrator can act on (counts, option
keys, template VMIDs), never the raw Proxmox answers. Templates are compared with what hvsync synced into
NetBox; a difference is a warning and nothing is written. A part is classified unsuccessful when the
backend did not answer it with 200 or any endpoint in it failed (SPEC 3.3: merge skipped); a template
difference alone does not make it unsuccessful, because the stages that run next create the missing VMs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q
from netbox_hvsync.models import SyncedVirtualMachine
from netbox_hvsync.rules.transport import BackendContext, Transport, TransportError, call

#: Read-only backend routes, one per reconciliation part, in the order they run.
RECONCILE_ROUTES: Mapping[str, str] = {
    "cluster": "/hv/cluster/status",
    "nodes": "/hv/nodes/",
    "firewall": "/hv/cluster/firewall",
    "datacenter": "/hv/cluster/options",
    "templates": "/hv/templates",
}
RECONCILE_TIMEOUT = 30.0
TEMPLATE_TAG = "pve-template"
#: How many VMIDs a template warning names before it summarises the rest.
TEMPLATE_WARNING_LIMIT = 10


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in _list(value) if isinstance(v, Mapping)]


def summarize_firewall(data: Any) -> dict[str, Any]:
    fw = data if isinstance(data, Mapping) else {}
    options = fw.get("options") if isinstance(fw.get("options"), Mapping) else {}
    groups, ipsets = _dicts(fw.get("groups")), _dicts(fw.get("ipsets"))
    return {
        "enabled": str(options.get("enable", 0)) in ("1", "True", "true"),
        "policy_in": options.get("policy_in"),
        "policy_out": options.get("policy_out"),
        "groups": len(groups),
        "group_rules": sum(len(_list(g.get("rules"))) for g in groups),
        "rules": len(_list(fw.get("rules"))),
        "aliases": len(_list(fw.get("aliases"))),
        "ipsets": len(ipsets),
        "ipset_entries": sum(len(_list(s.get("entries"))) for s in ipsets),
    }


def summarize_datacenter(data: Any) -> dict[str, Any]:
    options = data if isinstance(data, Mapping) else {}
    return {"option_keys": sorted(str(k) for k in options)}


def template_ids(data: Any) -> dict[int, str]:
    """VMID -> name of the templates one endpoint reported."""
    out: dict[int, str] = {}
    for t in _dicts(data):
        if str(t.get("vmid", "")).isdigit():
            out[int(t["vmid"])] = str(t.get("name") or "")
    return out


def summarize_templates(data: Any) -> dict[str, Any]:
    found = template_ids(data)
    by_type: dict[str, int] = {}
    for t in _dicts(data):
        by_type[str(t.get("type"))] = by_type.get(str(t.get("type")), 0) + 1
    return {"templates": len(found), "vmids": sorted(found), "by_type": dict(sorted(by_type.items()))}


def summarize_items(data: Any) -> dict[str, Any]:
    return {"items": len(data) if isinstance(data, list | Mapping) else 0}


SUMMARIES: Mapping[str, Callable[[Any], dict[str, Any]]] = {
    "cluster": summarize_items,
    "nodes": summarize_items,
    "firewall": summarize_firewall,
    "datacenter": summarize_datacenter,
    "templates": summarize_templates,
}


@dataclass
class Reconciliation:
    """The job-data record (`data.sync.reconciliation`) and the job-log warnings of one run."""

    ok: bool = True
    parts: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    failed_parts: list[str] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        return {"ok": self.ok, "parts": self.parts, "failed_parts": self.failed_parts}


def read_part(
    transport: Transport, context: BackendContext, part: str, scope_csv: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One backend read: (the recorded part, backend id -> raw `data` of each endpoint that answered)."""
    url = context.url(RECONCILE_ROUTES[part]) + f"?hv_endpoint_ids={scope_csv}"  # digits and commas
    try:
        answer = call(transport, "GET", url, headers=context.auth_headers(), timeout=RECONCILE_TIMEOUT)
    except TransportError as exc:
        return {"ok": False, "error": f"{exc.kind}: backend unreachable"}, {}
    body = answer.body if isinstance(answer.body, Mapping) else {}
    per: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    for entry in _dicts(body.get("endpoints")):
        key = str(entry.get("endpoint_id"))
        if entry.get("ok"):
            per[key] = {"ok": True, **SUMMARIES[part](entry.get("data"))}
            raw[key] = entry.get("data")
        else:
            error = entry.get("error") if isinstance(entry.get("error"), Mapping) else {}
            per[key] = {
                "ok": False,
                "error": {
                    "kind": error.get("kind"),
                    "status": error.get("status"),
                    "detail": str(error.get("detail") or "")[:300],
                },
            }
    ok = answer.status == 200 and all(v["ok"] for v in per.values())
    recorded: dict[str, Any] = {"ok": ok, "status": answer.status, "endpoints": per}
    if answer.status != 200 and isinstance(body.get("detail"), str):
        recorded["error"] = body["detail"][:300]
    return recorded, raw


def netbox_templates(endpoint_pks: Iterable[int]) -> dict[int, set[int]]:
    """Plugin endpoint pk -> VMIDs of the VMs hvsync synced as templates (sidecar flag or the tag)."""
    out: dict[int, set[int]] = {pk: set() for pk in endpoint_pks}
    rows = (
        SyncedVirtualMachine.objects.filter(endpoint_id__in=list(out))
        .filter(Q(is_template=True) | Q(virtual_machine__tags__slug=TEMPLATE_TAG))
        .values_list("endpoint_id", "vmid")
        .distinct()
    )
    for endpoint_id, vmid in rows:
        out[endpoint_id].add(int(vmid))
    return out


def _named(vmids: list[int], names: Mapping[int, str]) -> str:
    shown = [f"{v} {names[v]}".strip() if v in names else str(v) for v in vmids[:TEMPLATE_WARNING_LIMIT]]
    more = len(vmids) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def compare_templates(
    recorded: dict[str, Any], raw: Mapping[str, Any], endpoints: Mapping[int, str], pk_of: Mapping[int, int]
) -> list[str]:
    """Add `missing`/`extra` to each answered endpoint of the templates part; return the warnings.

    `endpoints` maps backend id -> name, `pk_of` backend id -> plugin endpoint pk."""
    synced = netbox_templates(pk_of.values())
    warnings: list[str] = []
    for backend_id, data in raw.items():
        if not backend_id.isdigit() or int(backend_id) not in pk_of:
            continue
        proxmox = template_ids(data)
        in_netbox = synced.get(pk_of[int(backend_id)], set())
        missing = sorted(set(proxmox) - in_netbox)
        extra = sorted(in_netbox - set(proxmox))
        recorded["endpoints"][backend_id].update(missing=missing, extra=extra)
        name = endpoints.get(int(backend_id), f"backend id {backend_id}")
        if missing:
            warnings.append(
                f"templates of {name}: {len(missing)} in Proxmox not synced to NetBox as templates "
                f"({_named(missing, proxmox)})"
            )
        if extra:
            warnings.append(
                f"templates of {name}: {len(extra)} synced to NetBox as templates but not templates in "
                f"Proxmox ({_named(extra, {})})"
            )
    return warnings


def reconcile(
    transport: Transport,
    context: BackendContext,
    scope_csv: str,
    endpoints: Mapping[int, str],
    pk_of: Mapping[int, int],
) -> Reconciliation:
    """Every part in RECONCILE_ROUTES order; read-only on both sides."""
    result = Reconciliation()
    for part in RECONCILE_ROUTES:
        recorded, raw = read_part(transport, context, part, scope_csv)
        if part == "templates" and raw:
            result.warnings.extend(compare_templates(recorded, raw, endpoints, pk_of))
        result.parts[part] = recorded
        if not recorded["ok"]:
            result.ok = False
            result.failed_parts.append(part)
    return result
