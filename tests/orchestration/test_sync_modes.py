"""Per-endpoint sync modes (SPEC 4.3, 4.5): the plugin sends each hv endpoint's modes with its stage calls,
the backend filters that guest kind at source, and an endpoint syncing no guest kind skips the
guest-only stages with the mode-disabled reason. Before, the plugin never sent the modes at all."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from conftest import PLUGIN_API, NetBox, Plugin
from fault_proxy import FaultProxy

VMS = "/virtualization/virtual-machines/create/stream"


def guests_seen(stage: dict[str, Any]) -> int:
    summary = stage["summary"]
    return sum(summary.get(k, 0) for k in ("created", "updated", "unchanged"))


def stage_queries(faults: FaultProxy, route: str) -> list[dict[str, list[str]]]:
    return [parse_qs(urlsplit(h.path).query) for h in faults.hits if h.path.split("?", 1)[0] == route]


def set_modes(netbox: NetBox, pk: int, vm: bool, template: bool) -> None:
    row = netbox.patch(
        f"{PLUGIN_API}hv-endpoints/{pk}/", {"sync_mode_vm": vm, "sync_mode_vm_template": template}
    )
    assert (row["sync_mode_vm"], row["sync_mode_vm_template"]) == (vm, template)


def test_sync_modes_reach_the_backend_and_filter_guest_kinds(
    netbox: NetBox, plugin: Plugin, faults: FaultProxy, emulator: Any
) -> None:
    pk = plugin.hv_endpoint["id"]
    route = VMS
    try:
        everything = netbox.run_sync(sync_types=["devices", "virtual-machines"])
        assert everything["status"]["value"] == "completed", everything["error"]
        full = everything["data"]["sync"]["stages"][1]
        assert "sync_modes" not in full  # the defaults: one call, as before
        assert stage_queries(faults, route)[-1]["sync_mode_vm_template"] == ["true"]

        set_modes(netbox, pk, vm=True, template=False)
        faults.hits.clear()
        no_templates = netbox.run_sync(sync_types=["devices", "virtual-machines"])
        assert no_templates["status"]["value"] == "completed", no_templates["error"]
        stage = no_templates["data"]["sync"]["stages"][1]
        assert stage["sync_modes"] == {"vm": True, "vm_template": False} and stage["hv_endpoints"] == [pk]
        query = stage_queries(faults, route)[-1]
        assert query["sync_mode_vm"] == ["true"] and query["sync_mode_vm_template"] == ["false"]
        templates = sum(1 for g in emulator.state.guests.values() if g.is_template)
        assert templates >= 1
        assert guests_seen(stage) == guests_seen(full) - templates

        set_modes(netbox, pk, vm=False, template=False)
        faults.hits.clear()
        nothing = netbox.run_sync(sync_types=["virtual-machines"])
        # the only selected stage is skipped for the only endpoint: no stage ran (SPEC 4.5)
        assert nothing["status"]["value"] == "failed"
        assert nothing["error"].startswith("No sync stage ran"), nothing["error"]
        assert (
            "virtual-machines (endpoint" in nothing["error"] and "disabled by sync mode" in nothing["error"]
        )
        assert stage_queries(faults, route) == []  # no call for a stage with nothing to do
    finally:
        set_modes(netbox, pk, vm=True, template=True)
