"""Fault matrix: hvsync on a real NetBox against a Proxmox that misbehaves on purpose (issue 44, section 3).

The emulator's faults on demand (docs/emulator.md, "Faults on demand") are switched through its control
API, some of them at an exact point of a running job: the fault proxy between NetBox's worker and the
backend runs a callback before it forwards a stage's stream (`FaultProxy.before`). Every case ends with a
no-change resync that writes nothing (no created/updated/deleted object, no new ObjectChange row), which
proves the fault left nothing half-written behind. Cases run only the stages their point needs, except the
node that goes offline in the middle of a full sync.
"""

from __future__ import annotations

import inspect
import math
import ssl
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import PLUGIN_API, STAGES, Backend, NetBox, Plugin, assert_no_secrets
from fault_proxy import FaultProxy
from hvsync_backend import wire
from hvsync_backend.sync.proxmox import ProxmoxReader

ROUTES = {s.slug: s.route for s in wire.STAGES}
VERBS = ("created", "updated", "deleted")
OFFLINE = "pve2"


# -- the emulator ------------------------------------------------------------------------------------


class Pve:
    """The session's emulator through HTTP: its API with the token, its control API with the secret."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def _client(self) -> httpx.Client:
        return httpx.Client(verify=ssl.create_default_context(cafile=self.handle.tls_verify), timeout=30)

    def faults(self, **settings: Any) -> dict[str, Any]:
        """Set the named faults (the others stay), as an operator's tool would, over the control API."""
        with self._client() as c:
            r = c.post(
                self.handle.url + "/_emulator/faults",
                json=settings,
                headers={"X-PVE-Emulator-Secret": self.handle.control_secret},
            )
        assert r.status_code == 200, r.text
        return dict(r.json()["data"])

    def clear(self) -> None:
        with self._client() as c:
            r = c.delete(
                self.handle.url + "/_emulator/faults",
                headers={"X-PVE-Emulator-Secret": self.handle.control_secret},
            )
        assert r.status_code == 200, r.text

    def raw(self, method: str, path: str, **values: Any) -> httpx.Response:
        """One API call with the emulator's token (GET: query parameters, else a form body)."""
        auth = f"PVEAPIToken={self.handle.token_id}={self.handle.token_secret}"
        get = method == "GET"
        with self._client() as c:
            return c.request(
                method,
                self.handle.api_url + path,
                params=values if get else None,
                data=None if get else values or None,
                headers={"Authorization": auth},
            )

    def api(self, method: str, path: str, **values: Any) -> Any:
        r = self.raw(method, path, **values)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        return r.json()["data"]


@pytest.fixture(scope="module")
def pve(emulator: Any, plugin: Plugin) -> Iterator[Pve]:
    made = Pve(emulator)
    made.clear()
    yield made
    made.clear()


@pytest.fixture
def calm(pve: Pve, faults: FaultProxy) -> Iterator[Pve]:
    """Each case starts and ends with a well-behaved cluster (and a clean proxy)."""
    pve.clear()
    yield pve
    pve.clear()


# -- reading a job -----------------------------------------------------------------------------------


def stages_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["data"]["sync"]["stages"])


def written(job: dict[str, Any]) -> dict[str, int]:
    return {v: sum((s.get("summary") or {}).get(v, 0) for s in stages_of(job)) for v in VERBS}


def gone_counts(job: dict[str, Any]) -> int:
    return sum((s.get("summary") or {}).get("gone", 0) for s in stages_of(job))


def ok(job: dict[str, Any]) -> dict[str, Any]:
    assert job["status"]["value"] == "completed", (job["error"], job["data"]["sync"].get("errors"))
    assert all(s["ok"] for s in stages_of(job)), [s for s in stages_of(job) if not s["ok"]]
    return job


def quiet_resync(netbox: NetBox, **body: Any) -> dict[str, Any]:
    """A rerun that must find nothing to do: nothing created, updated or deleted, no changelog row."""
    changes = netbox.count("core/object-changes/")
    job = ok(netbox.run_sync(**body))
    assert written(job) == dict.fromkeys(VERBS, 0), [
        (s["stage"], s.get("summary"))
        for s in stages_of(job)
        if any((s.get("summary") or {}).get(v) for v in VERBS)
    ]
    assert netbox.count("core/object-changes/") == changes
    return job


def vms(netbox: NetBox) -> dict[str, dict[str, Any]]:
    rows = netbox.get("virtualization/virtual-machines/", tag="hvsync", limit=1000)["results"]
    return {r["name"]: r for r in rows}


def synced_vms(netbox: NetBox) -> dict[int, dict[str, Any]]:
    rows = netbox.get(PLUGIN_API + "synced-virtual-machines/", limit=1000)["results"]
    return {int(r["vmid"]): r for r in rows}


def backend_metric(backend: Backend, name: str, **labels: str) -> float:
    """One series of the backend's /metrics (0 when absent): Proxmox requests by method and status."""
    from conftest import BACKEND_KEY

    text = httpx.get(backend.url + "/metrics", headers={"X-Service-API-Key": BACKEND_KEY}, timeout=10).text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        series, value = line.rsplit(" ", 1)
        got = ",".join(sorted(series[len(name) + 1 : -1].split(",")))
        if all(part in got.split(",") for part in want.split(",")):
            total += float(value)
    return total


# -- the cases -----------------------------------------------------------------------------------------


def test_baseline_full_sync(netbox: NetBox, plugin: Plugin, calm: Pve) -> None:
    """The starting point of every case: the demo cluster synced (the next case proves it converged)."""
    job = ok(netbox.run_sync())
    assert [s["stage"] for s in stages_of(job)] == STAGES


def test_node_offline_mid_full_sync_leaves_its_guests_alone(
    netbox: NetBox, plugin: Plugin, calm: Pve, faults: FaultProxy
) -> None:
    """pve2 stops answering when the job's second stage starts (after the devices stage and its reads): its
    guests are left as they were (a change made in Proxmox before is not written, nothing is marked gone or
    deleted), the other nodes' guests sync, and the run names the node. The job read the cluster's status
    while pve2 still answered; the stages that read a per-node list (tasks, node networks) get 595 for it,
    leave pve2 out as if it had been offline from the start (not as an empty node), name it, and go on
    with the other nodes (they failed for the whole endpoint before)."""
    pve = calm
    memory = {
        vmid: int(pve.api("GET", f"/nodes/{node}/qemu/{vmid}/config")["memory"]) + 512
        for node, vmid in (("pve1", 100), (OFFLINE, 101))
    }
    pve.api("PUT", "/nodes/pve1/qemu/100/config", memory=memory[100])
    pve.api("PUT", f"/nodes/{OFFLINE}/qemu/101/config", memory=memory[101])
    before = vms(netbox)
    on_pve2 = {vmid for vmid, row in synced_vms(netbox).items() if row["node_name"] == OFFLINE}
    assert on_pve2 and on_pve2 == {vmid for vmid, g in pve.handle.state.guests.items() if g.node == OFFLINE}

    faults.before(ROUTES["storage"], lambda _hit: pve.faults(node_offline=[OFFLINE]))
    job = ok(netbox.run_sync())
    assert pve.handle.faults["node_offline"] == [OFFLINE]
    by_stage = {s["stage"]: s for s in stages_of(job)}
    for stage in ("task-history", "network-interfaces"):
        named = [o for o in by_stage[stage]["failed_objects"] if o["object"] == f"node {OFFLINE}"]
        assert len(named) == 1 and "595" in str(named[0]), by_stage[stage]["failed_objects"]
    assert by_stage["virtual-machines"]["summary"]["updated"] == 1  # web-01 on pve1, nothing else
    left_out = {o["object"] for o in by_stage["virtual-machines"]["failed_objects"]}
    assert {f"vm {vmid}" for vmid in on_pve2} <= left_out
    after = vms(netbox)
    assert after["web-01"]["memory"] == memory[100]
    assert after["web-02"]["memory"] == before["web-02"]["memory"]
    assert {n: r["id"] for n, r in after.items()} == {n: r["id"] for n, r in before.items()}
    assert written(job)["deleted"] == 0 and gone_counts(job) == 0
    assert all(synced_vms(netbox)[vmid].get("gone_since") is None for vmid in on_pve2)
    assert_no_secrets(job, plugin.planted)

    # a new job with pve2 still away sees it offline from the start: it skips the node, deletes and marks
    # nothing (its task rows outlive the retention), and writes only what describes the nodes themselves
    still = ok(netbox.run_sync())
    assert written(still)["created"] == 0 and written(still)["deleted"] == 0 and gone_counts(still) == 0
    wrote = {s["stage"] for s in stages_of(still) if any(s["summary"][v] for v in VERBS)}
    assert wrote <= {"devices", "storage"}, wrote
    assert vms(netbox)["web-02"]["memory"] == before["web-02"]["memory"]

    # back online: the pending change lands, nothing is created or deleted, and a resync writes nothing
    pve.clear()
    back = ok(netbox.run_sync())
    assert written(back)["created"] == 0 and written(back)["deleted"] == 0
    assert {s["stage"]: s for s in stages_of(back)}["virtual-machines"]["summary"]["updated"] == 1
    assert vms(netbox)["web-02"]["memory"] == memory[101]
    quiet_resync(netbox)


GUEST_STAGES = ["devices", "storage", "virtual-machines"]


def test_lost_quorum_reads_still_work_and_the_sync_writes_nothing(
    netbox: NetBox, plugin: Plugin, calm: Pve
) -> None:
    """Without quorum Proxmox refuses every write (500 "cluster not ready - no quorum?") but answers every
    read; hvsync only reads Proxmox, so the sync completes, and on a converged NetBox it writes nothing."""
    pve = calm
    pve.faults(no_quorum=True)
    status = pve.api("GET", "/cluster/status")
    assert next(e for e in status if e["type"] == "cluster")["quorate"] == 0
    refused = pve.raw("PUT", "/nodes/pve1/qemu/100/config", description="x")
    assert refused.status_code == 500 and "no quorum" in refused.json()["message"]
    job = quiet_resync(netbox, sync_types=GUEST_STAGES)
    assert [s["stage"] for s in stages_of(job)] == GUEST_STAGES


def test_a_ticket_that_expires_mid_sync_is_renewed(
    netbox: NetBox, plugin: Plugin, calm: Pve, faults: FaultProxy, backend: Backend
) -> None:
    """With password access hvsync logs in for a ticket (hv/client.py) and logs in again when Proxmox
    answers 401. Tickets live 3 s here, and the job waits past that between its two stages: the second
    stage's first read is refused, hvsync logs in again, and the sync completes (writing nothing)."""
    pve = calm
    path = f"{PLUGIN_API}hv-endpoints/{plugin.hv_endpoint['id']}/"
    lifetime = 3.0
    netbox.patch(path, {"access_methods": ["password"], "password": pve.handle.password})
    try:
        pve.faults(ticket_lifetime=lifetime)
        logins = backend_metric(
            backend, "hvsync_upstream_requests_total", target="proxmox", method="POST", status="200"
        )
        refusals = backend_metric(
            backend, "hvsync_upstream_requests_total", target="proxmox", method="GET", status="401"
        )
        faults.before(ROUTES["vm-snapshots"], lambda _hit: time.sleep(lifetime + 0.5))
        job = quiet_resync(netbox, sync_types=["virtual-machines", "vm-snapshots"])
        assert [s["stage"] for s in stages_of(job)] == ["virtual-machines", "vm-snapshots"]
        assert all(len(s.get("attempts") or [1]) == 1 for s in stages_of(job))
        after_logins = backend_metric(
            backend, "hvsync_upstream_requests_total", target="proxmox", method="POST", status="200"
        )
        after_refusals = backend_metric(
            backend, "hvsync_upstream_requests_total", target="proxmox", method="GET", status="401"
        )
        assert after_refusals - refusals >= 1  # the expired ticket was refused ...
        assert after_logins - logins >= 2  # ... and a second login followed the first
        assert_no_secrets(job, (*plugin.planted, pve.handle.password))
    finally:
        netbox.patch(path, {"access_methods": ["token"]})


def test_slow_guest_config_reads_stay_within_the_budget(netbox: NetBox, plugin: Plugin, calm: Pve) -> None:
    """2 s on every guest config read. A job reads each config once, at most READ_CONCURRENCY at a time
    (sync/proxmox.py), so the latency costs ceil(guests / concurrency) rounds of 2 s, plus one round for
    the templates the local reconciliation reads: the run must take at least the rounds (the fault
    applied) and at most twice its time without the fault (load) plus the rounds and the reconciliation's
    round; no read times out (the endpoint's timeout is far above 2 s) and nothing is retried."""
    pve = calm
    stages = ["virtual-machines"]
    plain = quiet_resync(netbox, sync_types=stages)
    base_s = plain["data"]["sync"]["runtime"]["total_ms"] / 1000
    latency = 2.0
    guests = len(pve.api("GET", "/cluster/resources", type="vm"))
    concurrency = inspect.signature(ProxmoxReader).parameters["concurrency"].default
    rounds = math.ceil(guests / concurrency)
    pve.faults(latency={"/nodes/*/qemu/*/config": latency, "/nodes/*/lxc/*/config": latency})
    slow = quiet_resync(netbox, sync_types=stages)
    slow_s = slow["data"]["sync"]["runtime"]["total_ms"] / 1000
    pve.clear()
    # the time without the fault, measured on both sides of the slow run (the machine's load varies)
    again = quiet_resync(netbox, sync_types=stages)
    base_s = max(base_s, again["data"]["sync"]["runtime"]["total_ms"] / 1000)
    bound = 2 * base_s + (rounds + 1) * latency
    print(f"latency case: {base_s:.1f} s without, {slow_s:.1f} s with, bound {bound:.1f} s")
    assert rounds * latency <= slow_s <= bound
    assert all(len(s.get("attempts") or [1]) == 1 for s in stages_of(slow))


def test_dropped_connections_are_retried_without_duplicates(
    netbox: NetBox, plugin: Plugin, calm: Pve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5% of Proxmox's connections close without an answer (seeded). A GET that got no answer is sent
    again (aiohttp resends once on a reused connection the server closed; the client then retries up to
    the endpoint's max_retries, 4 here), so the run completes, writes nothing on a converged NetBox, and
    no VM or interface exists twice. The backend's error counter does not show aiohttp's own resends, so
    the test counts the drops where they are drawn, in the emulator of this process."""
    pve = calm
    path = f"{PLUGIN_API}hv-endpoints/{plugin.hv_endpoint['id']}/"
    kept = netbox.get(path)
    stages = ["virtual-machines", "vm-snapshots", "vm-interfaces"]
    netbox.patch(path, {"max_retries": 4, "retry_backoff": 0.1})
    try:
        before_vms = netbox.count("virtualization/virtual-machines/", tag="hvsync")
        ifaces = netbox.get("virtualization/interfaces/", tag="hvsync", limit=1000)["results"]
        pve.faults(drop_rate=0.05, seed=7)
        faults_now = pve.handle.app.fault_gate.faults
        draw, dropped = faults_now.drop, []

        def counted() -> bool:
            hit = bool(draw())
            dropped.extend([1] if hit else [])
            return hit

        monkeypatch.setattr(faults_now, "drop", counted)
        job = quiet_resync(netbox, sync_types=stages)
        pve.clear()
        assert dropped, "no connection was dropped: the case proved nothing"
        print(f"dropped connections: {len(dropped)}")
        names = [
            r["name"]
            for r in netbox.get("virtualization/virtual-machines/", tag="hvsync", limit=1000)["results"]
        ]
        assert len(names) == len(set(names)) == before_vms
        after = netbox.get("virtualization/interfaces/", tag="hvsync", limit=1000)["results"]
        pairs = [(r["virtual_machine"]["id"], r["name"]) for r in after]
        assert len(pairs) == len(set(pairs)) == len(ifaces)
        assert {r["id"] for r in after} == {r["id"] for r in ifaces}
        assert [s["stage"] for s in stages_of(job)] == stages
    finally:
        netbox.patch(path, {"max_retries": kept["max_retries"], "retry_backoff": kept["retry_backoff"]})
    quiet_resync(netbox, sync_types=stages)


def test_a_guest_locked_by_a_backup_is_read_and_synced_as_it_is(
    netbox: NetBox, plugin: Plugin, calm: Pve
) -> None:
    """`lock: backup` only refuses changes and power actions; hvsync reads, which Proxmox answers as usual.
    hvsync maps no lock (SPEC and docs/sync.md have no lock field), so the guest syncs unchanged and the
    run writes nothing."""
    pve = calm
    before = vms(netbox)["web-02"]
    pve.faults(locked={"101": "backup"})
    assert pve.api("GET", f"/nodes/{OFFLINE}/qemu/101/config")["lock"] == "backup"
    job = quiet_resync(netbox, sync_types=["virtual-machines", "vm-disks", "vm-interfaces"])
    after = vms(netbox)["web-02"]
    assert (after["id"], after["status"], after["memory"]) == (
        before["id"],
        before["status"],
        before["memory"],
    )
    assert gone_counts(job) == 0


def test_a_failing_vzdump_task_is_reported_by_the_task_history(
    netbox: NetBox, plugin: Plugin, calm: Pve
) -> None:
    """A vzdump that ends in `TASK ERROR: ...`: Proxmox's task list gives the error as the task's status,
    and the task-history stage records it on the task's row; a rerun writes nothing more."""
    pve = calm
    message = "injected: backup storage full"
    pve.faults(task_error={"vzdump": message}, time_scale=0)
    upid = pve.api("POST", "/nodes/pve1/vzdump", vmid=100, storage="nfs-backup")
    deadline = time.monotonic() + 10
    while (state := pve.api("GET", f"/nodes/pve1/tasks/{upid}/status"))["status"] != "stopped":
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    assert state["exitstatus"] == message
    stages = ["task-history", "vm-backups"]
    job = ok(netbox.run_sync(sync_types=stages))
    assert {s["stage"]: s for s in stages_of(job)}["task-history"]["summary"]["created"] >= 1
    rows = netbox.get(PLUGIN_API + "task-history/", limit=1000)["results"]
    [row] = [r for r in rows if r["upid"] == upid]
    assert (row["task_type"], row["status"], row["vmid"]) == ("vzdump", message, 100)
    quiet_resync(netbox, sync_types=stages)
