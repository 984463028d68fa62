"""What the in-NetBox tests share besides fixtures: the plugin's API root, real-token clients, users with
chosen permissions, a guest's plugin records, the backend binary and a candidate key.

A plain module (no test module imports another, nor the conftest); `conftest.py` builds its fixtures on it.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

API = "/api/plugins/hvsync/"


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
