"""Base fixtures for the plugin's tests against a real NetBox.

`tools/netbox_instance.py pytest` has already cloned a migrated NetBox database (with the plugin's
migrations applied) and configured Django to use it, so pytest-django must not create a test database
of its own: each test runs in a transaction that is rolled back.
"""

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests


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

API = "/api/plugins/hvsync/"


@pytest.fixture
def superuser(db):
    from users.models import User

    return User.objects.create_user(username="hv-admin", password="pw-hv-admin", is_superuser=True)


def token_client(user, write_enabled: bool = True):
    """A DRF client that authenticates with a real v2 NetBox API token (through NetBox's own auth)."""
    from rest_framework.test import APIClient
    from users.models import Token

    token = Token(user=user, version=2, write_enabled=write_enabled)
    plaintext = Token.generate() if hasattr(Token, "generate") else "t" * 40
    token.token = plaintext
    token.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer nbt_{token.key}.{plaintext}")
    return client


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


def guest_records(hv: dict[str, Any], vm: Any) -> dict[str, Any]:
    """One of each plugin record a sync keeps about a guest on `hv`'s endpoint: a backup on the PBS
    storage, a snapshot, a task, a backup routine and a replication job (shared by the GraphQL and
    rows tests)."""
    from netbox_hvsync import models

    endpoint = hv["endpoint"]
    hv["pbs"].nodes.set([hv["node1"]])
    return {
        "backup": models.HvBackup.objects.create(
            storage=hv["pbs"], volid="pbs:backup/vm/100/x", vmid=100, virtual_machine=vm, size=3 * 2**33
        ),
        "snapshot": models.HvSnapshot.objects.create(
            virtual_machine=vm, name="snap1", vmstate=True, description="before upgrade"
        ),
        "task": models.HvTaskHistory.objects.create(
            endpoint=endpoint,
            node=hv["node1"],
            upid="UPID:pve1:1",
            task_type="qmstart",
            vmid=100,
            user="root@pam",
            status="OK",
            starttime="2026-11-20T01:00:00Z",
        ),
        "routine": models.BackupRoutine.objects.create(
            endpoint=endpoint,
            job_id="job-gql",
            storage=hv["pbs"],
            selection=[100, 101],
            keep_last=3,
            raw_config={"id": "job-gql"},
        ),
        "replication": models.Replication.objects.create(
            endpoint=endpoint,
            replication_id="100-0",
            virtual_machine=vm,
            guest=100,
            target="pve2",
            jobnum=0,
            rate=12.5,
        ),
    }


REPO = Path(__file__).resolve().parents[4]
BACKEND_BIN = REPO / ".venv" / "bin" / "hvsync-backend"
CANDIDATE = "adoptKEY-" + "c4f1" * 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        for _ in range(200):
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def user_with(*perms: str):
    """A logged-in client for a user holding only these NetBox object permissions."""
    from django.contrib.contenttypes.models import ContentType
    from django.test import Client
    from users.models import ObjectPermission, User

    user = User.objects.create_user(username=f"limited-{len(perms)}-{User.objects.count()}")
    for perm in perms:
        app, codename = perm.split(".")
        action, model = codename.split("_", 1)
        permission = ObjectPermission.objects.create(name=f"{perm}-{user.pk}", actions=[action])
        permission.object_types.set([ContentType.objects.get(app_label=app, model=model)])
        permission.users.add(user)
    client = Client()
    client.force_login(user)
    return client
