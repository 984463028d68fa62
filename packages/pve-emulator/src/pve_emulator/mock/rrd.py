"""Time series of nodes, guests and storages: ``rrddata`` (rows) and ``rrd`` (a PNG graph), as
``PVE::RRD`` reads them from the RRD files pvestatd fills.

Rows and steps are PVE's (``create_rrd_data``): the newest row ends at the current step boundary of
the emulator's clock, one row per step back over the time frame, each row labelled with the end of
its step (``time``). PVE 9 files (``pve-{type}-9.0``): hour 60 s x 60, day 60 s x 1440, week 30 min x
336, month 30 min x 1440, year 6 h x 1440, decade 1 week x 570; PVE 8 files (``pve2-{type}``): 70 rows
at 60 s, 30 min, 3 h, 12 h and 1 week. The columns are the file's data sources (pmxcfs ``status.c``).

Figures follow the object's live ones, the same that ``/cluster/resources`` shows: capacities
(``maxcpu``, ``maxmem``, ``maxdisk``, ``memtotal``, ``total``...) are the live values in every row; usage
(``cpu``, ``mem``, ``used``...) wobbles around the live value (a daily wave plus noise, capped by its
capacity); network and disk I/O are rates in bytes per second, a guest's counters spread over a day
(a node's: its running guests' plus its own). A guest's rows before it was started carry what pvestatd sends for a stopped guest (capacities
and ``disk``, no ``cpu``, ``mem`` or I/O); rows before it was created carry only ``time``. Rows of a
one-minute step have ``MAX`` equal to ``AVERAGE`` (one sample per row), coarser ones a ``MAX`` above
it. Everything is a function of the object, the row's time and ``ClusterState.seed``: the same seed
and clock give the same answers.
"""

from __future__ import annotations

import math
import re
import struct
import zlib
from typing import Any

from pve_emulator.errors import ApiError
from pve_emulator.mock.cluster import node_usage
from pve_emulator.mock.guests.common import guest_usage
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import ClusterState, Guest
from pve_emulator.mock.storage import storage_enabled_on, storage_status

RRD_DIR = "/var/lib/rrdcached/db"
#: timeframe -> (step in seconds, rows), PVE 9 (``$setup``) and PVE 8 (``$setup_pve2``)
STEPS_9 = {
    "hour": (60, 60),
    "day": (60, 1440),
    "week": (1800, 336),
    "month": (1800, 1440),
    "year": (21600, 1440),
    "decade": (604800, 570),
}
STEPS_8 = {
    "hour": (60, 70),
    "day": (1800, 70),
    "week": (10800, 70),
    "month": (43200, 70),
    "year": (604800, 70),
}
#: data sources per file type (``rrd_def_*`` in pmxcfs): PVE 8's, then what PVE 9 appends
NODE_DS_8 = (
    "loadavg",
    "maxcpu",
    "cpu",
    "iowait",
    "memtotal",
    "memused",
    "swaptotal",
    "swapused",
    "roottotal",
    "rootused",
    "netin",
    "netout",
)
NODE_DS_9 = (
    *NODE_DS_8,
    "memavailable",
    "arcsize",
    "pressurecpusome",
    "pressureiosome",
    "pressureiofull",
    "pressurememorysome",
    "pressurememoryfull",
)
VM_DS_8 = ("maxcpu", "cpu", "maxmem", "mem", "maxdisk", "disk", "netin", "netout", "diskread", "diskwrite")
VM_DS_9 = (
    *VM_DS_8,
    "memhost",
    "pressurecpusome",
    "pressurecpufull",
    "pressureiosome",
    "pressureiofull",
    "pressurememorysome",
    "pressurememoryfull",
)
STORAGE_DS = ("total", "used")
#: what pvestatd sends for a guest that is not running (the other columns unknown)
STOPPED_DS = ("maxcpu", "maxmem", "maxdisk", "disk")
DAY = 86400  # a guest's I/O counters (``netin``...) spread over a day give its rates
SWAP = 8 * 1024**3
ROOT_TOTAL, ROOT_USED = 100 * 1024**3, 12 * 1024**3
_META_CTIME = re.compile(r"(?:^|,)ctime=(\d+)")


def pve9(state: ClusterState) -> bool:
    return not str(state.release).startswith("8")


def row_times(state: ClusterState, timeframe: str, now: float) -> tuple[int, list[int]]:
    """The step and the ``time`` of every row: the ends of the steps up to the last boundary."""
    step, count = (STEPS_9 if pve9(state) else STEPS_8)[timeframe]
    last = step * int(now // step)
    return step, [last - step * (count - 1 - k) for k in range(count)]


class Wobble:
    """Deterministic variation of one series: ``factor(t, amplitude)`` around 1 for a row's AVERAGE,
    ``peak`` for how far its MAX lies above (0 for one-sample rows)."""

    def __init__(self, seed: int, key: str, step: int) -> None:
        self.key = zlib.crc32(f"{seed}:{key}".encode())
        self.phase = (self.key % 1000) / 1000
        self.smooth = 1 / math.sqrt(max(step // 60, 1))  # averaging many samples flattens noise

    def noise(self, t: int, salt: int) -> float:
        """A value in [-1, 1] from the row time alone."""
        mixed = (t * 2654435761 + self.key * 40503 + salt * 97) & 0xFFFFFFFF
        mixed = (mixed ^ (mixed >> 15)) * 2246822519 & 0xFFFFFFFF
        return ((mixed >> 8) & 0xFFFF) / 32767.5 - 1

    def factor(self, t: int, amplitude: float, salt: int) -> float:
        daily = math.sin(2 * math.pi * (t / 86400 + self.phase))
        return 1 + amplitude * (0.6 * daily + 0.4 * self.noise(t, salt) * self.smooth)

    def peak(self, t: int, amplitude: float, salt: int) -> float:
        return amplitude * (1 - self.smooth) * (0.5 + 0.5 * abs(self.noise(t, salt + 7)))


# -- the series of each kind of object ----------------------------------------------------------------


def guest_created(guest: Guest) -> int | None:
    """When the guest was created, from qemu-server's ``meta: ...,ctime=<epoch>`` (None: long ago)."""
    found = _META_CTIME.search(str(guest.config.get("meta", "")))
    return int(found.group(1)) if found else None


def guest_series(
    state: ClusterState, guest: Guest, now: float, cf: str, step: int, times: list[int]
) -> list[dict[str, Any]]:
    usage = guest_usage(guest, now)
    running = guest.status == "running" and guest.started is not None
    wobble = Wobble(state.seed, f"vm/{guest.vmid}", step)
    created = guest_created(guest)
    columns = VM_DS_9 if pve9(state) else VM_DS_8
    rates = {name: usage[name] / DAY for name in ("netin", "netout", "diskread", "diskwrite")}
    rows = []
    for t in times:
        row: dict[str, Any] = {"time": t}
        if created is not None and t <= created:
            rows.append(row)
            continue
        row.update(
            maxcpu=usage["maxcpu"], maxmem=usage["maxmem"], maxdisk=usage["maxdisk"], disk=usage["disk"]
        )
        if not running or guest.started is None or t <= guest.started:
            rows.append(row)
            continue
        use = value(wobble, cf, t, 0.3, 1)
        row["cpu"] = min(usage["cpu"] * use, 1.0)
        row["mem"] = min(usage["mem"] * value(wobble, cf, t, 0.1, 2), usage["maxmem"])
        for salt, (name, rate) in enumerate(rates.items(), start=3):
            row[name] = rate * value(wobble, cf, t, 0.5, salt)
        if "memhost" in columns:
            row["memhost"] = row["mem"]
            row.update(pressures(row["cpu"], "pressurecpufull" in columns))
        rows.append(row)
    return rows


def node_series(
    state: ClusterState, name: str, now: float, cf: str, step: int, times: list[int]
) -> list[dict[str, Any]]:
    usage = node_usage(state, name)
    wobble = Wobble(state.seed, f"node/{name}", step)
    guests = [g for g in state.guests.values() if g.node == name and g.status == "running"]
    traffic = [guest_usage(g, now) for g in guests]
    netin = 2000 + sum(u["netin"] / DAY for u in traffic)
    netout = 1500 + sum(u["netout"] / DAY for u in traffic)
    columns = NODE_DS_9 if pve9(state) else NODE_DS_8
    rows = []
    for t in times:
        cpu = min(usage["cpu"] * value(wobble, cf, t, 0.3, 1), 1.0)
        memused = min(usage["mem"] * value(wobble, cf, t, 0.05, 2), usage["maxmem"])
        row: dict[str, Any] = {
            "time": t,
            "loadavg": cpu * usage["maxcpu"] * 1.2,
            "maxcpu": usage["maxcpu"],
            "cpu": cpu,
            "iowait": 0.002 * value(wobble, cf, t, 0.5, 3),
            "memtotal": usage["maxmem"],
            "memused": memused,
            "swaptotal": SWAP,
            "swapused": 0,
            "roottotal": ROOT_TOTAL,
            "rootused": ROOT_USED,
            "netin": netin * value(wobble, cf, t, 0.5, 4),
            "netout": netout * value(wobble, cf, t, 0.5, 5),
        }
        if "memavailable" in columns:
            row.update(memavailable=usage["maxmem"] - memused, arcsize=0)
            row.update({k: v for k, v in pressures(cpu, False).items() if k in columns})
        rows.append(row)
    return rows


def storage_series(
    state: ClusterState, node: str, storage: str, cf: str, step: int, times: list[int]
) -> list[dict[str, Any]]:
    status = storage_status(state, node, storage)
    wobble = Wobble(state.seed, f"storage/{node}/{storage}", step)
    return [
        {
            "time": t,
            "total": status["total"],
            "used": min(status["used"] * value(wobble, cf, t, 0.02, 1), status["total"]),
        }
        for t in times
    ]


def value(wobble: Wobble, cf: str, t: int, amplitude: float, salt: int) -> float:
    """The factor of one field in one row: AVERAGE around 1, MAX above it by the row's peak."""
    factor = wobble.factor(t, amplitude, salt)
    if cf == "MAX":
        factor += wobble.peak(t, amplitude, salt)
    return max(factor, 0.0)


def pressures(cpu: float, full: bool) -> dict[str, float]:
    """PSI averages (share of time stalled): small, growing with the CPU load."""
    out = {
        "pressurecpusome": round(cpu * 0.05, 4),
        "pressureiosome": round(cpu * 0.02, 4),
        "pressureiofull": round(cpu * 0.01, 4),
        "pressurememorysome": 0.0,
        "pressurememoryfull": 0.0,
    }
    if full:
        out["pressurecpufull"] = round(cpu * 0.02, 4)
    return out


# -- which RRD a path reads ---------------------------------------------------------------------------


def rrd_name(state: ClusterState, kind: str, ident: str) -> str:
    """The file ``PVE::RRD`` reads: ``pve-node-9.0/pve1``, ``pve2-vm/100``, ``pve-storage-9.0/pve1/local``."""
    return f"pve-{kind}-9.0/{ident}" if pve9(state) else f"pve2-{kind}/{ident}"


def no_file(state: ClusterState, kind: str, ident: str) -> ApiError:
    return ApiError(
        500, f"RRD error: opening '{RRD_DIR}/{rrd_name(state, kind, ident)}': No such file or directory"
    )


def series(call: Call) -> tuple[str, list[dict[str, Any]], tuple[str, ...]]:
    """(file name, rows, the file's data sources) of the object the path names; an object without an
    RRD file (unknown node, vmid, or a storage not on that node) is the RRD error Proxmox answers."""
    state, params = call.state, call.params
    now = call.clock.now()
    cf = str(params.get("cf") or "AVERAGE")
    step, times = row_times(state, str(params["timeframe"]), now)
    node = str(params["node"])
    if "vmid" in params:
        # one RRD namespace for both kinds, cluster-wide: the node and kind in the path are not checked
        guest = state.guests.get(int(params["vmid"]))
        if guest is None:
            raise no_file(state, "vm", str(params["vmid"]))
        rows = guest_series(state, guest, now, cf, step, times)
        return rrd_name(state, "vm", str(guest.vmid)), rows, VM_DS_9 if pve9(state) else VM_DS_8
    if "storage" in params:
        storage = str(params["storage"])
        cfg = state.storages.get(storage)
        if node not in state.nodes or cfg is None or not storage_enabled_on(cfg, node):
            raise no_file(state, "storage", f"{node}/{storage}")
        rows = storage_series(state, node, storage, cf, step, times)
        return rrd_name(state, "storage", f"{node}/{storage}"), rows, STORAGE_DS
    if node not in state.nodes:
        raise no_file(state, "node", node)
    rows = node_series(state, node, now, cf, step, times)
    return rrd_name(state, "node", node), rows, NODE_DS_9 if pve9(state) else NODE_DS_8


def rrddata(call: Call) -> list[dict[str, Any]]:
    return series(call)[1]


def rrd_graph(call: Call) -> dict[str, Any]:
    """``create_rrd_graph``: the file name of the graph and the PNG itself (``image``, its bytes as
    latin-1 text, as the JSON formatter passes them on); at most two data sources, as PVE draws."""
    name, rows, columns = series(call)
    ids = [d for d in re.split(r"[,;\s]+", str(call.params["ds"])) if d]
    if len(ids) > 2:
        raise ApiError(500, "fixme: no color definition")
    for ds in ids:
        if ds not in columns:
            raise ApiError(500, f"RRD error: No DS called '{ds}' in '{RRD_DIR}/{name}'")
    image = png_graph([[row.get(ds) for row in rows] for ds in ids])
    return {"filename": f"{RRD_DIR}/{name}_{'_'.join(ids)}.png", "image": image.decode("latin-1")}


# -- the PNG ------------------------------------------------------------------------------------------

WIDTH, HEIGHT = 800, 200
PALETTE = bytes([255, 255, 255, 0, 221, 255, 255, 0, 0, 220, 220, 220])  # white, #00ddff, #ff0000, grid


def png_graph(lines: list[list[float | None]]) -> bytes:
    """An 800x200 palette PNG with one line per series (PVE's colours), scaled from 0 to the peak."""
    canvas = [bytearray(WIDTH) for _ in range(HEIGHT)]
    for y in range(0, HEIGHT, HEIGHT // 4):
        canvas[y][:] = bytes([3]) * WIDTH
    top = max((v for line in lines for v in line if v is not None), default=0) or 1
    for colour, line in enumerate(lines, start=1):
        previous: int | None = None
        for x in range(WIDTH):
            sample = line[x * len(line) // WIDTH] if line else None
            if sample is None:
                previous = None
                continue
            y = HEIGHT - 1 - int(sample / top * (HEIGHT - 1))
            low, high = (y, y) if previous is None else (min(y, previous), max(y, previous))
            for row in range(low, high + 1):
                canvas[row][x] = colour
            previous = y
    raw = b"".join(b"\x00" + bytes(row) for row in canvas)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", WIDTH, HEIGHT, 8, 3, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"PLTE", PALETTE)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


for _base in (
    "/nodes/{node}",
    "/nodes/{node}/qemu/{vmid}",
    "/nodes/{node}/lxc/{vmid}",
    "/nodes/{node}/storage/{storage}",
):
    route("GET", f"{_base}/rrddata")(rrddata)
    route("GET", f"{_base}/rrd")(rrd_graph)
