"""prometheus-pve-exporter, unchanged from the registry, scraping an emulator process.

Every collector of the exporter (status, resources, node, cluster, version, backup-info, qdevice,
subscription, config, replication) runs against the demo emulator, once logged in with a password
(ticket) and once with an API token. Each metric family is compared with what the emulator's API itself
answers for the endpoint the collector reads, so a wrong value on either side fails. Then the state
changes through the API (a guest stopped, onboot flipped, a backup job added, a replication job created
and a failing one re-run) and the next scrape follows.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import yaml
from conftest import free_port, stop
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from conftest import RunningEmulator

GUEST_STATES = ["stopped", "request_stop", "request_start", "request_start_balance", "started", "fence"]
GUEST_STATES += ["recovery", "migrate", "relocate", "freeze", "error"]
NODE_HA_STATES = ["online", "maintenance", "unknown", "fence", "gone"]
LOCK_STATES = ["backup", "clone", "create", "migrate", "rollback", "snapshot", "snapshot-delete"]
LOCK_STATES += ["suspended", "suspending"]
SUBSCRIPTION_STATES = ["new", "notfound", "active", "invalid", "expired", "suspended"]
# cluster/resources key -> gauge family (and the *_total counter family where the exporter adds one)
RESOURCE_GAUGES = {
    "maxdisk": "pve_disk_size_bytes",
    "disk": "pve_disk_usage_bytes",
    "maxmem": "pve_memory_size_bytes",
    "mem": "pve_memory_usage_bytes",
    "netout": "pve_network_transmit_bytes",
    "netin": "pve_network_receive_bytes",
    "diskwrite": "pve_disk_write_bytes",
    "diskread": "pve_disk_read_bytes",
    "cpu": "pve_cpu_usage_ratio",
    "maxcpu": "pve_cpu_usage_limit",
    "uptime": "pve_uptime_seconds",
    "shared": "pve_storage_shared",
}
RESOURCE_COUNTERS = {
    "netout": "pve_network_transmit_bytes",  # the parser strips the _total suffix of counters
    "netin": "pve_network_receive_bytes",
    "diskwrite": "pve_disk_written_bytes",
    "diskread": "pve_disk_read_bytes",
}
REPLICATION_GAUGES = {
    "duration": "pve_replication_duration_seconds",
    "last_sync": "pve_replication_last_sync_timestamp_seconds",
    "last_try": "pve_replication_last_try_timestamp_seconds",
    "next_sync": "pve_replication_next_sync_timestamp_seconds",
    "fail_count": "pve_replication_failed_syncs",
}
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


@dataclass
class Exporter:
    """A running pve_exporter process and where its log goes."""

    port: int
    log: Path
    process: subprocess.Popen[bytes]

    def scrape(self, target: RunningEmulator) -> Samples:
        """One /pve scrape of the target, parsed; ``{family: {sorted labels: value}}`` per type."""
        response = httpx.get(
            f"http://127.0.0.1:{self.port}/pve",
            params={"target": target.address, "module": "default"},
            timeout=60,
        )
        assert response.status_code == 200, (
            f"{response.status_code}: {response.text[:300]}\n{self.log_text()}"
        )
        out: Samples = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                if sample.name.endswith(("_created",)):
                    continue
                key = family.name if family.type != "counter" else family.name + "#counter"
                out.setdefault(key, {})[tuple(sorted(sample.labels.items()))] = sample.value
        return out

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def run_exporter(
    tool_env: dict[str, str], tools_venv: Path, tmp_path: Path
) -> Iterator[Callable[[dict[str, Any]], Exporter]]:
    """Start ``pve_exporter`` with a module config (all collectors on); stopped afterwards."""
    started: list[Exporter] = []

    def start(module: dict[str, Any]) -> Exporter:
        config = tmp_path / f"pve-{len(started)}.yml"
        config.write_text(yaml.safe_dump({"default": module}))
        port = free_port()
        log = tmp_path / f"exporter-{port}.log"
        process = subprocess.Popen(
            [
                str(tools_venv / "bin" / "pve_exporter"),
                "--config.file",
                str(config),
                "--web.listen-address",
                f"127.0.0.1:{port}",
            ],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env=tool_env,
        )
        exporter = Exporter(port=port, log=log, process=process)
        started.append(exporter)
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"pve_exporter exited with {process.returncode}:\n{exporter.log_text()}")
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                return exporter
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    pytest.fail(f"pve_exporter did not listen within 30 s:\n{exporter.log_text()}")
                time.sleep(0.2)

    yield start
    for exporter in started:
        stop(exporter.process)


def password_module(emulator: RunningEmulator) -> dict[str, Any]:
    return {"user": emulator.user, "password": emulator.password, "verify_ssl": False}


def token_module(emulator: RunningEmulator) -> dict[str, Any]:
    return {
        "user": emulator.token_user,
        "token_name": emulator.token_name,
        "token_value": emulator.token_secret,
        "verify_ssl": False,
    }


def labels(**values: object) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in values.items()))


def by_id(samples: dict[tuple[tuple[str, str], ...], float]) -> dict[str, float]:
    """Samples of an ``id``-only family keyed by id."""
    return {dict(key)["id"]: value for key, value in samples.items()}


def local_node(emulator: RunningEmulator) -> str:
    status = emulator.get("/cluster/status")
    assert isinstance(status, list)
    return next(e["name"] for e in status if e["type"] == "node" and e["local"])


# --- comparisons, one per collector --------------------------------------------------------------


def check_status(metrics: Samples, emulator: RunningEmulator) -> None:
    status: Any = emulator.get("/cluster/status")
    expected: dict[str, float] = {}
    for entry in status:
        if entry["type"] == "node":
            expected[entry["id"]] = entry["online"]
        else:
            expected[f"cluster/{entry['name']}"] = entry["quorate"]
    resources: Any = emulator.get("/cluster/resources")
    for r in resources:
        if r["type"] in ("qemu", "lxc"):
            expected[r["id"]] = float(r["status"] == "running")
        elif r["type"] == "storage":
            expected[r["id"]] = float(r["status"] == "available")
    assert by_id(metrics["pve_up"]) == expected
    nodes = [e for e in status if e["type"] == "node"]
    assert metrics["pve_node_info"] == {
        labels(id=n["id"], level=n["level"], name=n["name"], nodeid=n["nodeid"]): 1.0 for n in nodes
    }
    cluster = next(e for e in status if e["type"] == "cluster")
    info = {k: v for k, v in cluster.items() if k not in ("type", "name")}
    assert metrics["pve_cluster_info"] == {labels(**{**info, "id": f"cluster/{cluster['name']}"}): 1.0}
    version: Any = emulator.get("/version")
    assert metrics["pve_version_info"] == {
        labels(**{k: version[k] for k in ("release", "repoid", "version")}): 1.0
    }


def check_resources(metrics: Samples, emulator: RunningEmulator) -> None:
    resources: Any = emulator.get("/cluster/resources")
    gauges: dict[str, dict[str, float]] = {name: {} for name in RESOURCE_GAUGES.values()}
    counters: dict[str, dict[str, float]] = {name + "#counter": {} for name in RESOURCE_COUNTERS.values()}
    guests, storages = {}, {}
    ha: dict[tuple[tuple[str, str], ...], float] = {}
    locks: dict[tuple[tuple[str, str], ...], float] = {}
    for r in resources:
        for key, family in RESOURCE_GAUGES.items():
            if key in r:
                gauges[family][r["id"]] = float(r[key])
        for key, family in RESOURCE_COUNTERS.items():
            if key in r:
                counters[family + "#counter"][r["id"]] = float(r[key])
        states = {"qemu": GUEST_STATES, "lxc": GUEST_STATES, "node": NODE_HA_STATES}.get(r["type"], [])
        for state in states:
            ha[labels(id=r["id"], state=state)] = float(r.get("hastate") == state)
        if r["type"] in ("qemu", "lxc"):
            for state in LOCK_STATES:
                locks[labels(id=r["id"], state=state)] = float(r.get("lock") == state)
            guest_labels = {k: r.get(k, "") for k in ("id", "node", "name", "type", "template", "tags")}
            guests[labels(**guest_labels)] = 1.0
        if r["type"] == "storage":
            content = ",".join(sorted(str(r.get("content", "")).split(",")))
            storage_labels = {k: r.get(k, "") for k in ("id", "node", "storage", "plugintype")}
            storages[labels(**storage_labels, content=content)] = 1.0
    for family, expected in {**gauges, **counters}.items():
        got = by_id(metrics.get(family, {}))
        if family.startswith("pve_uptime_seconds"):
            assert got.keys() == expected.keys()
            assert all(abs(got[k] - expected[k]) <= 5 for k in expected), family  # seconds pass between reads
        else:
            assert got == expected, family
    assert metrics["pve_ha_state"] == ha
    assert metrics["pve_lock_state"] == locks
    assert metrics["pve_guest_info"] == guests
    assert metrics["pve_storage_info"] == storages


def check_backup_info(metrics: Samples, emulator: RunningEmulator) -> None:
    missing: Any = emulator.get("/cluster/backup-info/not-backed-up")
    status: Any = emulator.get("/cluster/status")
    cluster = f"cluster/{status[0]['name']}"
    assert metrics["pve_not_backed_up_total"] == {labels(id=cluster): float(len(missing))}
    assert by_id(metrics.get("pve_not_backed_up_info", {})) == {
        f"{g['type']}/{g['vmid']}": 1.0 for g in missing
    }


def check_node_collectors(metrics: Samples, emulator: RunningEmulator) -> None:
    """subscription, onboot (config) and replication read the local node (``local`` in cluster/status)."""
    node = local_node(emulator)
    subscription: Any = emulator.get(f"/nodes/{node}/subscription")
    assert metrics["pve_subscription_info"] == {
        labels(id=f"node/{node}", level=subscription.get("level", "unknown")): 1.0
    }
    assert metrics["pve_subscription_status"] == {
        labels(id=f"node/{node}", status=s): float(subscription.get("status", "unknown") == s)
        for s in SUBSCRIPTION_STATES
    }
    onboot = {}
    for kind in ("qemu", "lxc"):
        guests: Any = emulator.get(f"/nodes/{node}/{kind}")
        for guest in guests:
            config: Any = emulator.get(f"/nodes/{node}/{kind}/{guest['vmid']}/config")
            if "onboot" in config:
                onboot[labels(id=f"{kind}/{guest['vmid']}", node=node, type=kind)] = float(config["onboot"])
    assert onboot, "the local node's guests set onboot"
    assert metrics["pve_onboot_status"] == onboot
    jobs: Any = emulator.get(f"/nodes/{node}/replication")
    assert metrics.get("pve_replication_info", {}) == {
        labels(
            id=j["id"],
            type=j["type"],
            source=f"node/{j['source']}",
            target=f"node/{j['target']}",
            guest=f"{j['vmtype']}/{j['guest']}",
        ): 1.0
        for j in jobs
    }
    for key, family in REPLICATION_GAUGES.items():
        expected = {}
        for job in jobs:
            status: Any = emulator.get(f"/nodes/{node}/replication/{job['id']}/status")
            assert status == job, "a job's status equals its entry in the node list"
            if key in status:
                expected[job["id"]] = float(status[key])
        assert by_id(metrics.get(family, {})) == expected, family


def check_everything(metrics: Samples, emulator: RunningEmulator) -> None:
    check_status(metrics, emulator)
    check_resources(metrics, emulator)
    check_backup_info(metrics, emulator)
    check_node_collectors(metrics, emulator)


def assert_clean_log(exporter: Exporter) -> None:
    text = exporter.log_text()
    for marker in ("Traceback", "Exception", "[ERROR]", "ResourceException"):
        assert marker not in text, text


def assert_every_collector_answered(metrics: Samples) -> None:
    """Each collector yields at least one sample (qdevice stays silent: the demo has no QDevice)."""
    expected = [
        "pve_up",  # status
        "pve_cpu_usage_ratio",  # resources
        "pve_guest_info",
        "pve_storage_info",
        "pve_lock_state",
        "pve_ha_state",
        "pve_node_info",  # node
        "pve_cluster_info",  # cluster
        "pve_version_info",  # version
        "pve_not_backed_up_total",  # backup-info (the info family may rightly be empty)
        "pve_subscription_status",  # subscription
        "pve_onboot_status",  # config
        "pve_replication_info",  # replication
        "pve_replication_last_sync_timestamp_seconds",
        "pve_replication_failed_syncs",
        "pve_replication_next_sync_timestamp_seconds",
    ]
    assert [name for name in expected if not metrics.get(name)] == []


# --- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("login", [password_module, token_module], ids=["ticket", "token"])
def test_every_collector_matches_the_api(
    emulator: RunningEmulator,
    run_exporter: Callable[[dict[str, Any]], Exporter],
    login: Callable[[RunningEmulator], dict[str, Any]],
) -> None:
    exporter = run_exporter(login(emulator))
    metrics = exporter.scrape(emulator)
    assert_every_collector_answered(metrics)
    check_everything(metrics, emulator)
    replication = by_id(metrics["pve_replication_failed_syncs"])
    assert replication["103-0"] == 0 and replication["200-0"] > 0, "the demo has a good and a failing job"
    assert by_id(metrics["pve_replication_last_sync_timestamp_seconds"])["103-0"] > time.time() - 1800
    assert "pve_qdevice_up" not in metrics
    assert_clean_log(exporter)


def _wait_task(emulator: RunningEmulator, node: str, upid: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status: Any = emulator.get(f"/nodes/{node}/tasks/{upid}/status")
        if status["status"] == "stopped":
            assert status["exitstatus"] == "OK", status
            return
        time.sleep(0.1)
    pytest.fail(f"task {upid} did not finish")


def test_metrics_follow_state_changes(
    start_emulator: Callable[..., RunningEmulator], run_exporter: Callable[[dict[str, Any]], Exporter]
) -> None:
    emulator = start_emulator()
    exporter = run_exporter(token_module(emulator))
    node = local_node(emulator)
    before = exporter.scrape(emulator)
    check_everything(before, emulator)
    running: Any = [g for g in emulator.get(f"/nodes/{node}/qemu") if g["status"] == "running"]
    vmid = running[0]["vmid"]
    guests: Any = emulator.get("/cluster/resources", type="vm")
    backup_jobs: Any = emulator.get("/cluster/backup")
    with emulator.api() as api:
        upid = api.post(f"/nodes/{node}/qemu/{vmid}/status/stop").json()["data"]
        _wait_task(emulator, node, upid)
        assert api.put(f"/nodes/{node}/qemu/{vmid}/config", data={"onboot": 0}).status_code == 200
        for job in backup_jobs:  # then one job for the stopped guest: every other guest is uncovered
            assert api.delete(f"/cluster/backup/{job['id']}").status_code == 200
        assert (
            api.post(
                "/cluster/backup",
                data={"id": "exporter-test", "schedule": "sun 01:00", "storage": "nfs-backup", "vmid": vmid},
            ).status_code
            == 200
        )
        # a second job for the replicated db guest (local disks), to the node its first job does not use
        first: Any = emulator.get("/cluster/replication/103-0")
        nodes: Any = emulator.get("/nodes")
        other = next(n["node"] for n in nodes if n["node"] not in (node, first["target"]))
        created = {"id": "103-7", "type": "local", "target": other, "schedule": "*/5"}
        assert api.post("/cluster/replication", data=created).status_code == 200
        assert api.post(f"/nodes/{node}/replication/200-0/schedule_now").status_code == 200
    after = exporter.scrape(emulator)
    check_everything(after, emulator)
    assert by_id(after["pve_up"])[f"qemu/{vmid}"] == 0 and by_id(before["pve_up"])[f"qemu/{vmid}"] == 1
    assert by_id(after["pve_cpu_usage_ratio"])[f"qemu/{vmid}"] == 0
    onboot = {dict(k)["id"]: v for k, v in after["pve_onboot_status"].items()}
    assert onboot[f"qemu/{vmid}"] == 0
    not_backed = by_id(after["pve_not_backed_up_info"])
    assert set(not_backed) == {g["id"] for g in guests} - {f"qemu/{vmid}"}
    failed = by_id(after["pve_replication_failed_syncs"])
    assert failed["103-7"] == 0 and failed["200-0"] == 0, "the new job has not failed; the re-run succeeded"
    synced = by_id(after["pve_replication_last_sync_timestamp_seconds"])
    assert synced["103-7"] == 0 and synced["200-0"] >= time.time() - 60
    assert "103-7" not in by_id(before["pve_replication_failed_syncs"])
    assert by_id(before["pve_replication_last_sync_timestamp_seconds"])["200-0"] == 0
    assert_clean_log(exporter)
