"""Time series (``rrddata``, ``rrd``) of nodes, guests and storages: Proxmox's steps and columns per
release, figures that follow the object's state and ``/cluster/resources``, deterministic for a seed
and the emulator clock."""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from in_process import InProcess
from pve_emulator.clock import Clock
from pve_emulator.mock.rrd import NODE_DS_8, NODE_DS_9, VM_DS_8, VM_DS_9

#: the emulator's "now", held still for the module: row times and figures are a function of it (the
#: scenario's guests were started relative to the wall clock, so it is taken from there once)
NOW = float(int(time.time()))

PVE9_STEPS = {
    "hour": (60, 60),
    "day": (60, 1440),
    "week": (1800, 336),
    "month": (1800, 1440),
    "year": (21600, 1440),
}
PVE8_STEPS = {
    "hour": (60, 70),
    "day": (1800, 70),
    "week": (10800, 70),
    "month": (43200, 70),
    "year": (604800, 70),
}


def fixed_clock(pve: InProcess) -> None:
    pve.app.backend.clock = Clock(lambda: NOW)


@pytest.fixture(scope="module")
def pve() -> Iterator[InProcess]:
    emulator = InProcess()
    fixed_clock(emulator)
    yield emulator
    emulator.close()


@pytest.fixture(scope="module")
def pve8() -> Iterator[InProcess]:
    emulator = InProcess(release="8.4")
    fixed_clock(emulator)
    yield emulator
    emulator.close()


def rows(pve: InProcess, path: str, timeframe: str = "hour", cf: str | None = None) -> list[dict[str, Any]]:
    params = {"timeframe": timeframe, **({"cf": cf} if cf else {})}
    answer = pve.get(f"{path}/rrddata", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def resource(pve: InProcess, ident: str) -> dict[str, Any]:
    return next(r for r in pve.get("/cluster/resources").json()["data"] if r["id"] == ident)


def running_guest(pve: InProcess, kind: str) -> Any:
    return next(
        g
        for g in sorted(pve.state.guests.values(), key=lambda g: g.vmid)
        if g.kind == kind and g.status == "running"
    )


@pytest.mark.parametrize("timeframe", sorted(PVE9_STEPS))
def test_rows_at_proxmox_9_steps_ending_at_the_last_boundary(pve: InProcess, timeframe: str) -> None:
    step, count = PVE9_STEPS[timeframe]
    data = rows(pve, "/nodes/pve1", timeframe)
    times = [row["time"] for row in data]
    assert len(times) == count
    assert times[-1] == step * int(NOW // step)
    assert all(b - a == step for a, b in itertools.pairwise(times))


def test_decade_is_a_node_timeframe_of_pve_9(pve: InProcess) -> None:
    data = rows(pve, "/nodes/pve1", "decade")
    assert len(data) == 570 and data[1]["time"] - data[0]["time"] == 7 * 86400


@pytest.mark.parametrize("timeframe", sorted(PVE8_STEPS))
def test_pve_8_rows_are_70_at_its_old_steps(pve8: InProcess, timeframe: str) -> None:
    step, count = PVE8_STEPS[timeframe]
    data = rows(pve8, "/nodes/pve1/qemu/100", timeframe)
    assert len(data) == count and data[1]["time"] - data[0]["time"] == step


def test_columns_are_the_rrd_files_data_sources(pve: InProcess, pve8: InProcess) -> None:
    assert set(rows(pve, "/nodes/pve1")[-1]) == {"time", *NODE_DS_9}
    assert set(rows(pve8, "/nodes/pve1")[-1]) == {"time", *NODE_DS_8}
    guest = running_guest(pve, "qemu")
    assert set(rows(pve, f"/nodes/{guest.node}/qemu/{guest.vmid}")[-1]) == {"time", *VM_DS_9}
    assert set(rows(pve8, f"/nodes/{guest.node}/qemu/{guest.vmid}")[-1]) == {"time", *VM_DS_8}
    assert set(rows(pve, "/nodes/pve1/storage/local")[-1]) == {"time", "total", "used"}


def test_a_running_guest_follows_its_config_and_cluster_resources(pve: InProcess) -> None:
    for kind in ("qemu", "lxc"):
        guest = running_guest(pve, kind)
        live = resource(pve, f"{kind}/{guest.vmid}")
        data = rows(pve, f"/nodes/{guest.node}/{kind}/{guest.vmid}")
        for row in data:
            assert (row["maxcpu"], row["maxmem"], row["maxdisk"], row["disk"]) == (
                live["maxcpu"],
                live["maxmem"],
                live["maxdisk"],
                live["disk"],
            )
            assert 0 < row["cpu"] <= 1 and 0 < row["mem"] <= row["maxmem"]
            assert row["netin"] > 0 and row["netout"] > 0
        mean_cpu = sum(row["cpu"] for row in data) / len(data)
        mean_mem = sum(row["mem"] for row in data) / len(data)
        assert 0.6 * live["cpu"] < mean_cpu < 1.4 * live["cpu"]
        assert 0.85 * live["mem"] < mean_mem < 1.15 * live["mem"]


def test_a_stopped_guest_has_no_cpu_memory_or_traffic(pve: InProcess) -> None:
    guest = next(g for g in pve.state.guests.values() if g.kind == "qemu" and g.status == "stopped")
    live = resource(pve, f"qemu/{guest.vmid}")
    for row in rows(pve, f"/nodes/{guest.node}/qemu/{guest.vmid}", "day"):
        assert set(row) == {"time", "maxcpu", "maxmem", "maxdisk", "disk"}
        assert row["maxmem"] == live["maxmem"]


def test_rows_before_the_guest_started_are_a_stopped_guests(pve: InProcess) -> None:
    guest = running_guest(pve, "lxc")
    saved = guest.started
    guest.started = NOW - 1800
    try:
        data = rows(pve, f"/nodes/{guest.node}/lxc/{guest.vmid}")
    finally:
        guest.started = saved
    before = [row for row in data if row["time"] <= NOW - 1800]
    after = [row for row in data if row["time"] > NOW - 1800]
    assert before and after
    assert all("cpu" not in row and "maxmem" in row for row in before)
    assert all("cpu" in row for row in after)


def test_rows_before_the_guest_was_created_carry_only_time(pve: InProcess) -> None:
    guest = running_guest(pve, "qemu")
    guest.config["meta"] = f"creation-qemu=9.2.0,ctime={int(NOW) - 600}"
    try:
        data = rows(pve, f"/nodes/{guest.node}/qemu/{guest.vmid}")
    finally:
        del guest.config["meta"]
    assert all(set(row) == {"time"} for row in data if row["time"] <= NOW - 600)
    assert all("maxmem" in row for row in data if row["time"] > NOW - 600)


def test_node_and_storage_follow_cluster_resources(pve: InProcess) -> None:
    node = resource(pve, "node/pve1")
    data = rows(pve, "/nodes/pve1", "day")
    assert all(row["memtotal"] == node["maxmem"] and row["maxcpu"] == node["maxcpu"] for row in data)
    assert all(row["memused"] + row["memavailable"] == pytest.approx(row["memtotal"]) for row in data)
    assert 0.6 * node["cpu"] < sum(row["cpu"] for row in data) / len(data) < 1.4 * node["cpu"]
    storage = resource(pve, "storage/pve1/local-lvm")
    for row in rows(pve, "/nodes/pve1/storage/local-lvm"):
        assert row["total"] == storage["maxdisk"]
        assert row["used"] == pytest.approx(storage["disk"], rel=0.05)


def test_max_is_average_at_one_sample_per_row_and_above_it_when_consolidated(pve: InProcess) -> None:
    guest = running_guest(pve, "qemu")
    path = f"/nodes/{guest.node}/qemu/{guest.vmid}"
    assert rows(pve, path, "hour", "MAX") == rows(pve, path, "hour", "AVERAGE") == rows(pve, path, "hour")
    average, peak = rows(pve, path, "week", "AVERAGE"), rows(pve, path, "week", "MAX")
    average, peak = ([row for row in series if "cpu" in row] for series in (average, peak))  # since start
    assert len(average) == len(peak) > 10
    assert all(p["cpu"] >= a["cpu"] and p["netin"] >= a["netin"] for a, p in zip(average, peak, strict=True))
    assert any(p["cpu"] > a["cpu"] for a, p in zip(average, peak, strict=True))


def test_same_seed_and_clock_same_series_another_seed_another(pve: InProcess) -> None:
    guest = running_guest(pve, "qemu")
    path = f"/nodes/{guest.node}/qemu/{guest.vmid}"
    other = InProcess()
    fixed_clock(other)
    # both scenarios' guest started at the same moment (the scenario takes it from the wall clock)
    other.state.guests[guest.vmid].started = guest.started
    first, again = rows(pve, path, "week"), rows(pve, path, "week")
    assert first == again
    try:
        assert rows(other, path, "week") == first
        other.state.seed = 7
        reseeded = rows(other, path, "week")
    finally:
        other.close()
    assert [r.get("cpu") for r in reseeded] != [r.get("cpu") for r in first]
    assert [r["maxmem"] for r in reseeded] == [r["maxmem"] for r in first]


def test_an_object_without_an_rrd_file_is_proxmoxs_rrd_error(pve: InProcess) -> None:
    answer = pve.get("/nodes/pve1/qemu/9999/rrddata", params={"timeframe": "hour"})
    assert answer.status_code == 500
    assert answer.json()["message"] == (
        "RRD error: opening '/var/lib/rrdcached/db/pve-vm-9.0/9999': No such file or directory\n"
    )


def test_rrd_answers_the_graphs_filename_and_a_png(pve: InProcess) -> None:
    answer = pve.get("/nodes/pve1/rrd", params={"timeframe": "hour", "ds": "cpu,iowait"})
    assert answer.status_code == 200
    data = answer.json()["data"]
    assert data["filename"] == "/var/lib/rrdcached/db/pve-node-9.0/pve1_cpu_iowait.png"
    image = data["image"].encode("latin-1")
    assert image.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", image[16:24]) == (800, 200)
    missing = pve.get("/nodes/pve1/rrd", params={"timeframe": "hour", "ds": "bogus"})
    assert missing.status_code == 500
    assert (
        missing.json()["message"]
        == "RRD error: No DS called 'bogus' in '/var/lib/rrdcached/db/pve-node-9.0/pve1'\n"
    )
