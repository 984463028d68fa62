"""Base fixtures for the plugin's tests against a real NetBox.

`tools/netbox_instance.py pytest` has already cloned a migrated NetBox database (with the plugin's
migrations applied) and configured Django to use it, so pytest-django must not create a test database
of its own: each test runs in a transaction that is rolled back. What tests import themselves (the API
root, token clients, `user_with`, ...) lives in `support.py`: no test module imports the conftest.
"""

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support import BACKEND_BIN, free_port, token_client

#: Test modules whose subject is the plugin's own protocol and input handling (its backend client, key
#: adoption and pushes, URL and host rules, hostile input, strict filters), not what NetBox's release
#: changes (models, migrations, REST serializers, GraphQL, views, jobs, branching, change sets): marked
#: `release_agnostic`, they run on the default release only. The release matrix (tools/run-tests.sh) runs
#: the rest with `-m "not release_agnostic"`: measured on 2026-12-02, these modules are 40% of the suite's
#: time (538 of 1,339 s under load), three times over.
RELEASE_AGNOSTIC = {
    "test_backend_lifecycle",
    "test_dashboard_push",
    "test_endpoint_hosts",
    "test_filter_strictness",
    "test_grant_race",
    "test_hostile_input",
    "test_inventory_scheme",
    "test_key_proofs",
    "test_orchestration_adoption",
    "test_orchestration_jobs",
    "test_orchestration_repair",
    "test_plugin_settings",
    "test_repair_race",
    "test_retarget",
    "test_stream_lines",
    "test_transport_addresses",
    "test_wire_data",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in RELEASE_AGNOSTIC:
            item.add_marker(pytest.mark.release_agnostic)


@pytest.fixture(scope="session")
def django_db_setup(django_db_blocker):
    """Use the cloned database as it is (see module docstring)."""
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:  # fail loudly if unreachable
        cursor.execute("SELECT 1")
    yield


#
# hvsync fixtures: real users, real API tokens, real NetBox objects (added by the plugin's tests)
#


@pytest.fixture
def superuser(db):
    from users.models import User

    return User.objects.create_user(username="hv-admin", password="pw-hv-admin", is_superuser=True)


@pytest.fixture
def api(superuser):
    return token_client(superuser)


@pytest.fixture
def ui(superuser):
    from django.test import Client

    client = Client()
    client.force_login(superuser)
    return client


@pytest.fixture
def netbox_objects(db):
    """A site, a cluster with two VMs and a device: the NetBox side the Proxmox records link to."""
    from dcim.models import Device, DeviceRole, DeviceType, Manufacturer, Site
    from virtualization.models import Cluster, ClusterType, VirtualMachine

    site = Site.objects.create(name="hv-site", slug="hv-site")
    ctype = ClusterType.objects.create(name="Proxmox VE", slug="proxmox-ve")
    cluster = Cluster.objects.create(name="pve-a", type=ctype)
    manufacturer = Manufacturer.objects.create(name="Generic", slug="generic")
    dtype = DeviceType.objects.create(manufacturer=manufacturer, model="Server", slug="server")
    role = DeviceRole.objects.create(name="Hypervisor", slug="hypervisor")
    device = Device.objects.create(name="pve1", site=site, device_type=dtype, role=role, cluster=cluster)
    vm1 = VirtualMachine.objects.create(name="web-1", cluster=cluster)
    vm2 = VirtualMachine.objects.create(name="db-1", cluster=cluster)
    return {"site": site, "cluster": cluster, "device": device, "vm1": vm1, "vm2": vm2}


@pytest.fixture
def hv(db, netbox_objects):
    """One Proxmox endpoint with a cluster, two nodes and two storages; a second endpoint for contrast."""
    from netbox_hvsync import models

    endpoint = models.HvEndpoint(
        name="pve-a", domain="pve-a.example.net", username="root@pam", token_name="hvsync"
    )
    endpoint.token_value = "pve-a-token-secret-0001"
    endpoint.save()
    other = models.HvEndpoint.objects.create(
        name="pve-b", domain="pve-b.example.net", username="root@pam", access_methods=["password"]
    )
    cluster = models.HvCluster.objects.create(
        endpoint=endpoint, name="cluster-a", cluster=netbox_objects["cluster"]
    )
    other_cluster = models.HvCluster.objects.create(endpoint=other, name="cluster-b")
    node1 = models.HvNode.objects.create(
        cluster=cluster, name="pve1", node_id=1, online=True, device=netbox_objects["device"]
    )
    node2 = models.HvNode.objects.create(cluster=cluster, name="pve2", node_id=2, online=False)
    other_node = models.HvNode.objects.create(cluster=other_cluster, name="pve9", node_id=1, online=True)
    local = models.HvStorage.objects.create(
        cluster=cluster, name="local", storage_type="dir", content=["backup"]
    )
    pbs = models.HvStorage.objects.create(cluster=cluster, name="pbs", storage_type="pbs", content=["backup"])
    return {
        "endpoint": endpoint,
        "other": other,
        "hv_cluster": cluster,
        "other_cluster": other_cluster,
        "node1": node1,
        "node2": node2,
        "other_node": other_node,
        "local": local,
        "pbs": pbs,
        **netbox_objects,
    }


#: how long a test waits for the backend it starts to answer (seconds; start-up takes 2-20 s under load)
BACKEND_START_BUDGET = 120


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = open(tmp_path / "backend.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(BACKEND_BIN), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "HVSYNC_DATA_DIR": str(tmp_path / "data")},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        # a deadline, not a count of tries: on a loaded 2-core machine the backend's start-up (imports,
        # migrations) took longer than 200 quick tries, and the test then ran against no backend at all
        deadline = time.monotonic() + BACKEND_START_BUDGET
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the backend exited with {proc.returncode} before answering /health")
            try:
                if requests.get(url + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the backend did not answer /health within {BACKEND_START_BUDGET} s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)
