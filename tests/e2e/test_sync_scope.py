"""Scope: two endpoints with overlapping VMIDs stay separate; a run restricted to one endpoint never
touches the other's objects; the branch header reaches NetBox when asked; selected-object syncs."""

from __future__ import annotations

import re
from collections.abc import Callable

from conftest import Backend, NetBox, changelog_count
from pve_emulator.testing import running_emulator

CORE = [
    "/dcim/devices/create/stream",
    "/virtualization/virtual-machines/create/stream",
    "/virtualization/virtual-disks/create/stream",
    "/virtualization/interfaces/create/stream",
]


def writes(backend: Backend, **params: str) -> int:
    return sum(backend.complete(route, **params)["requests"]["netbox_writes"] for route in CORE)


def test_two_endpoints_with_overlapping_vmids_stay_separate(
    backend_factory: Callable[[], Backend], netbox: NetBox
) -> None:
    backend = backend_factory()
    backend.add_inventory(netbox)
    with running_emulator(scenario="large", vms=3) as one, running_emulator(scenario="large", vms=5) as two:
        first = backend.add_hv(one, "alpha (inv:901)", site_slug="alpha-site")
        second = backend.add_hv(two, "beta (inv:902)", site_slug="beta-site")
        assert set(one.state.guests) & set(two.state.guests), "scenario must overlap VMIDs"
        assert writes(backend) > 0
        vms = {
            v["custom_fields"]["hvsync_key"]: v
            for v in netbox.all("virtualization/virtual-machines", tag="hvsync")
            if (v["custom_fields"].get("hvsync_key") or "").startswith(("inv901|", "inv902|"))
        }
        assert set(vms) == {f"inv901|vm|{i}" for i in one.state.guests} | {
            f"inv902|vm|{i}" for i in two.state.guests
        }
        shared = sorted(set(one.state.guests) & set(two.state.guests))[0]
        a, b = vms[f"inv901|vm|{shared}"], vms[f"inv902|vm|{shared}"]
        assert a["id"] != b["id"] and a["cluster"]["id"] != b["cluster"]["id"]
        assert (a["site"]["slug"], b["site"]["slug"]) == ("alpha-site", "beta-site")
        for key, vm in vms.items():
            disks = netbox.all("virtualization/virtual-disks", virtual_machine_id=vm["id"])
            guest = (one if key.startswith("inv901") else two).state.guests[int(key.rsplit("|", 1)[1])]
            assert len(disks) == sum(
                1
                for k, v in guest.config.items()
                if re.fullmatch(r"(scsi|virtio|sata|ide)\d+|rootfs|mp\d+", k) and "media=cdrom" not in v
            )

        # Restricted to the first endpoint, even with removal enabled, the second's objects are not touched.
        before = changelog_count(netbox)
        assert writes(backend, hv_endpoint_ids=str(first["id"]), delete_stale="true") == 0
        assert changelog_count(netbox) == before
        # A VM deleted on the second endpoint is never deleted by the run, even with delete_stale: removal
        # goes through the plugin's deletion requests (docs/sync.md), and these endpoints have no plugin
        # record, so their objects carry no sync-state record to mark gone either.
        gone = sorted(two.state.guests)[-1]
        del two.state.guests[gone]
        done = backend.complete(CORE[1], hv_endpoint_ids=str(second["id"]), delete_stale="true")
        summary = done["summary"]
        assert (summary["deleted"], summary["gone"], summary["created"], summary["updated"]) == (0, 0, 0, 0)
        assert len(netbox.all("virtualization/virtual-machines", cf_hvsync_key=f"inv902|vm|{gone}")) == 1
        if gone in one.state.guests:
            assert len(netbox.all("virtualization/virtual-machines", cf_hvsync_key=f"inv901|vm|{gone}")) == 1
        assert writes(backend) == 0


def test_branch_header_reaches_netbox_when_asked(
    backend_factory: Callable[[], Backend], netbox: NetBox
) -> None:
    backend = backend_factory()
    backend.add_inventory(netbox)
    with running_emulator(scenario="large", vms=2) as emu:
        backend.add_hv(emu, "gamma (inv:903)", site_slug="gamma-site")
        done = backend.complete(CORE[0], inventory_branch_schema_id="nosuchbr")
        # netbox-branching rejects an unknown branch: proof the header was sent, reported truthfully.
        assert done["ok"] is False
        assert (done["error"]["source"], done["error"]["status"]) == ("netbox", 400)
        assert "branch" in done["error"]["detail"].lower()
        assert backend.complete(CORE[0])["ok"] is True


def test_individual_vm_sync_writes_only_that_vm(
    backend_factory: Callable[[], Backend], netbox: NetBox
) -> None:
    backend = backend_factory()
    backend.add_inventory(netbox)
    with running_emulator(scenario="large", vms=4) as emu:
        backend.add_hv(emu, "delta (inv:904)", site_slug="delta-site")
        for route in [*CORE, "/ipam/ip-addresses/create/stream"]:
            assert backend.complete(route)["ok"] is True
        vmid = sorted(emu.state.guests)[1]
        emu.state.guests[vmid].config["memory"] = str(
            int(emu.state.guests[vmid].config.get("memory", 1024)) + 256
        )
        r = backend.client.post("/sync/individual/vm", params={"vmid": vmid}, headers=backend.headers)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["ok"] is True
        assert body["requests"]["netbox_writes"] == 1
        assert {s["stage"]: s["summary"]["updated"] for s in body["stages"]}["virtual-machines"] == 1
        [vm] = netbox.all("virtualization/virtual-machines", cf_hvsync_key=f"inv904|vm|{vmid}")
        assert vm["memory"] == int(emu.state.guests[vmid].config["memory"])
        missing = backend.client.post("/sync/individual/vm", params={"vmid": 99999}, headers=backend.headers)
        assert missing.status_code == 404
        bad = backend.client.post("/sync/individual/vm", headers=backend.headers)
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "vmid"]
