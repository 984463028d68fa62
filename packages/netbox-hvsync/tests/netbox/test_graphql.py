"""The plugin's models through NetBox's real `/graphql/` endpoint, authenticated with an API token.

For every model: the list query returns the created row with its values, a filter selects it and a
non-matching filter drops it, the single-object query returns it by id. A user without view permission
gets no rows; secrets are no field of any type (introspection) and no planted secret or its ciphertext
ever appears in a response body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from support import guest_records, token_client

pytestmark = pytest.mark.django_db

BACKEND_KEY = "gql-planted-backend-key-0123456789abcdef"
INVENTORY_TOKEN = "gql-planted-inventory-token-0123456789"
PVE_TOKEN = "pve-a-token-secret-0001"  # planted by conftest's `hv`
PVE_PASSWORD = "gql-planted-pve-password-0123456789"
SECRET_COLUMNS = ("token_ciphertext", "token_value_ciphertext", "password_ciphertext")
NETBOX_BASE_FIELDS = {"display", "class_type", "changelog", "custom_fields", "tags", "journal_entries"}


@dataclass
class Case:
    """One model's queries: `selection` returns `expected` for `obj`; `hit` selects it, `miss` drops it."""

    query: str
    obj: Any
    selection: str
    expected: dict[str, Any]
    hit: str
    miss: str


class Graph:
    """POSTs queries to /graphql/ and refuses any body carrying a planted secret or its ciphertext."""

    def __init__(self, client: Any, forbidden: list[str]) -> None:
        self.client = client
        self.forbidden = forbidden

    def __call__(self, query: str) -> dict[str, Any]:
        response = self.client.post("/graphql/", {"query": query}, format="json")
        assert response.status_code == 200, response.content
        raw = response.content.decode()
        leaked = [secret for secret in self.forbidden if secret in raw]
        assert not leaked, f"secret material in a GraphQL response: {len(leaked)} value(s)"
        return json.loads(raw)

    def data(self, query: str) -> dict[str, Any]:
        body = self(query)
        assert "errors" not in body, body["errors"]
        return body["data"]


@pytest.fixture
def world(hv, superuser) -> dict[str, Any]:
    """One row of every plugin model (besides conftest's endpoints, clusters, nodes and storages)."""
    from django.contrib.contenttypes.models import ContentType
    from ipam.models import VLAN, IPAddress, Prefix
    from netbox_hvsync import models
    from virtualization.models import VirtualDisk, VMInterface

    endpoint, vm = hv["endpoint"], hv["vm1"]
    endpoint.password = PVE_PASSWORD
    endpoint.access_methods = ["token", "password"]
    endpoint.save()
    backend = models.BackendEndpoint(name="be-gql", url="https://hvsync.example.net:8800", enabled=False)
    backend.token = BACKEND_KEY
    backend.save()
    inventory = models.InventoryEndpoint(name="nb-gql", domain="nb.example.net", token_key="k1")
    inventory.token = INVENTORY_TOKEN
    inventory.save()
    hv["pbs"].total = 5 * 2**40  # beyond GraphQL's 32-bit Int: the BigInt scalar
    hv["pbs"].save()
    rows = {
        "backend": backend,
        "inventory": inventory,
        **guest_records(hv, vm),
        "deletion": models.DeletionRequest.objects.create(
            endpoint=endpoint,
            object_type=ContentType.objects.get(app_label="virtualization", model="virtualmachine"),
            object_id=vm.pk,
            object_repr="web-1",
            reason="decommissioned",
            requested_by=superuser,
        ),
        "apply": models.ApplyJob.objects.create(
            endpoint=endpoint, status="failed", plan={"create": [1]}, error="conflict"
        ),
        "svm": models.SyncedVirtualMachine.objects.create(
            endpoint=endpoint,
            virtual_machine=vm,
            cluster=hv["hv_cluster"],
            node_name="pve1",
            vmid=100,
            last_run_id="run-1",
        ),
        "sdevice": models.SyncedDevice.objects.create(
            endpoint=endpoint, device=hv["device"], node=hv["node1"], node_name="pve1"
        ),
        "sinterface": models.SyncedInterface.objects.create(
            endpoint=endpoint,
            vm_interface=VMInterface.objects.create(virtual_machine=vm, name="net0"),
            vmid=100,
            key="net0",
        ),
        "sdisk": models.SyncedVirtualDisk.objects.create(
            endpoint=endpoint,
            virtual_disk=VirtualDisk.objects.create(virtual_machine=vm, name="scsi0", size=8),
            vmid=100,
            key="scsi0",
        ),
        "sip": models.SyncedIPAddress.objects.create(
            endpoint=endpoint,
            ip_address=IPAddress.objects.create(address="192.0.2.5/24"),
            vmid=100,
            interface_key="net0",
            address="192.0.2.5/24",
        ),
        "svlan": models.SyncedVLAN.objects.create(
            endpoint=endpoint, vlan=VLAN.objects.create(vid=5, name="v5"), zone="z1", vnet="v5"
        ),
        "sprefix": models.SyncedPrefix.objects.create(
            endpoint=endpoint, prefix=Prefix.objects.create(prefix="203.0.113.0/24"), vnet="v5", subnet="s1"
        ),
    }
    return {**hv, **rows}


def cases(w: dict[str, Any], superuser: Any) -> list[Case]:
    ep = w["endpoint"]
    backend = w["backend"]
    backend.refresh_from_db()
    return [
        Case(
            "backend_endpoint",
            backend,
            "name backend_url enabled port verify_ssl key_state key_fingerprint has_token is_pending",
            {
                "name": "be-gql",
                "backend_url": "https://hvsync.example.net:8800",
                "enabled": False,
                "port": 8800,
                "verify_ssl": True,
                "key_state": backend.key_state,
                "key_fingerprint": backend.key_fingerprint,
                "has_token": True,
                "is_pending": not backend.key_fingerprint,
            },
            'name: {exact: "be-gql"}',
            'name: {exact: "be-other"}',
        ),
        Case(
            "inventory_endpoint",
            w["inventory"],
            "name domain port token_version token_key has_token verify_ssl enabled",
            {
                "name": "nb-gql",
                "domain": "nb.example.net",
                "port": 443,
                "token_version": 2,
                "token_key": "k1",
                "has_token": True,
                "verify_ssl": True,
                "enabled": True,
            },
            'token_key: {exact: "k1"}',
            'token_key: {exact: "k2"}',
        ),
        Case(
            "hv_endpoint",
            ep,
            "name domain port username access_methods token_name has_token_value has_password timeout",
            {
                "name": "pve-a",
                "domain": "pve-a.example.net",
                "port": 8006,
                "username": "root@pam",
                "access_methods": ["token", "password"],
                "token_name": "hvsync",
                "has_token_value": True,
                "has_password": True,
                "timeout": 15,
            },
            'domain: {exact: "pve-a.example.net"}',
            'domain: {exact: "pve-z.example.net"}',
        ),
        Case(
            "hv_cluster",
            w["hv_cluster"],
            "name endpoint { name } cluster { name }",
            {"name": "cluster-a", "endpoint": {"name": "pve-a"}, "cluster": {"name": "pve-a"}},
            f'endpoint_id: "{ep.pk}"',
            'endpoint: {name: {exact: "pve-b"}}',
        ),
        Case(
            "hv_node",
            w["node1"],
            "name node_id online cluster { name } device { name }",
            {
                "name": "pve1",
                "node_id": 1,
                "online": True,
                "cluster": {"name": "cluster-a"},
                "device": {"name": "pve1"},
            },
            f'online: {{exact: true}}, cluster_id: "{w["hv_cluster"].pk}"',
            "online: {exact: false}",
        ),
        Case(
            "hv_storage",
            w["pbs"],
            "name storage_type content shared total nodes { name } cluster { name }",
            {
                "name": "pbs",
                "storage_type": "pbs",
                "content": ["backup"],
                "shared": False,
                "total": 5 * 2**40,
                "nodes": [{"name": "pve1"}],
                "cluster": {"name": "cluster-a"},
            },
            f'storage_type: {{exact: "pbs"}}, cluster: {{endpoint_id: "{ep.pk}"}}',
            'storage_type: {exact: "dir"}',
        ),
        Case(
            "hv_backup",
            w["backup"],
            "volid vmid size protected verification_state storage { name } virtual_machine { name }",
            {
                "volid": "pbs:backup/vm/100/x",
                "vmid": 100,
                "size": 3 * 2**33,
                "protected": False,
                "verification_state": "none",
                "storage": {"name": "pbs"},
                "virtual_machine": {"name": "web-1"},
            },
            "vmid: {gte: 100}",
            "vmid: {lt: 100}",
        ),
        Case(
            "hv_snapshot",
            w["snapshot"],
            "name parent vmstate description virtual_machine { name }",
            {
                "name": "snap1",
                "parent": "",
                "vmstate": True,
                "description": "before upgrade",
                "virtual_machine": {"name": "web-1"},
            },
            "vmstate: {exact: true}",
            "vmstate: {exact: false}",
        ),
        Case(
            "hv_task_history",
            w["task"],
            "upid task_type vmid user status starttime node { name } endpoint { name }",
            {
                "upid": "UPID:pve1:1",
                "task_type": "qmstart",
                "vmid": 100,
                "user": "root@pam",
                "status": "OK",
                "starttime": "2026-11-20T01:00:00+00:00",
                "node": {"name": "pve1"},
                "endpoint": {"name": "pve-a"},
            },
            'task_type: {exact: "qmstart"}',
            'task_type: {exact: "vzdump"}',
        ),
        Case(
            "backup_routine",
            w["routine"],
            "job_id selection keep_last raw_config status storage { name } endpoint { name }",
            {
                "job_id": "job-gql",
                "selection": [100, 101],
                "keep_last": 3,
                "raw_config": {"id": "job-gql"},
                "status": "active",
                "storage": {"name": "pbs"},
                "endpoint": {"name": "pve-a"},
            },
            'job_id: {i_contains: "GQL"}',
            'job_id: {exact: "job-other"}',
        ),
        Case(
            "replication",
            w["replication"],
            "replication_id guest target jobnum rate job_type virtual_machine { name }",
            {
                "replication_id": "100-0",
                "guest": 100,
                "target": "pve2",
                "jobnum": 0,
                "rate": 12.5,
                "job_type": "local",
                "virtual_machine": {"name": "web-1"},
            },
            "guest: {exact: 100}",
            "guest: {exact: 101}",
        ),
        Case(
            "deletion_request",
            w["deletion"],
            "object_repr object_id reason status requested_by { username } object_type { app_label model }",
            {
                "object_repr": "web-1",
                "object_id": w["vm1"].pk,
                "reason": "decommissioned",
                "status": "pending",
                "requested_by": {"username": superuser.username},
                "object_type": {"app_label": "virtualization", "model": "virtualmachine"},
            },
            'status: {exact: "pending"}',
            'status: {exact: "approved"}',
        ),
        Case(
            "apply_job",
            w["apply"],
            "status plan error endpoint { name }",
            {"status": "failed", "plan": {"create": [1]}, "error": "conflict", "endpoint": {"name": "pve-a"}},
            'error: {contains: "conf"}',
            'status: {exact: "completed"}',
        ),
        Case(
            "synced_virtual_machine",
            w["svm"],
            "vmid node_name vm_type is_template last_run_id virtual_machine { name } cluster { name }",
            {
                "vmid": 100,
                "node_name": "pve1",
                "vm_type": "qemu",
                "is_template": False,
                "last_run_id": "run-1",
                "virtual_machine": {"name": "web-1"},
                "cluster": {"name": "cluster-a"},
            },
            'vmid: {exact: 100}, last_run_id: {exact: "run-1"}',
            "vmid: {exact: 101}",
        ),
        Case(
            "synced_device",
            w["sdevice"],
            "node_name device { name } node { name } endpoint { name }",
            {
                "node_name": "pve1",
                "device": {"name": "pve1"},
                "node": {"name": "pve1"},
                "endpoint": {"name": "pve-a"},
            },
            'node_name: {exact: "pve1"}',
            'node_name: {exact: "pve2"}',
        ),
        Case(
            "synced_interface",
            w["sinterface"],
            "key vmid node_name vm_interface { name } interface { name }",
            {
                "key": "net0",
                "vmid": 100,
                "node_name": "",
                "vm_interface": {"name": "net0"},
                "interface": None,
            },
            'key: {exact: "net0"}',
            'key: {exact: "net1"}',
        ),
        Case(
            "synced_virtual_disk",
            w["sdisk"],
            "key vmid virtual_disk { name }",
            {"key": "scsi0", "vmid": 100, "virtual_disk": {"name": "scsi0"}},
            'key: {exact: "scsi0"}',
            'key: {exact: "scsi1"}',
        ),
        Case(
            "synced_ip_address",
            w["sip"],
            "address vmid interface_key ip_address { address }",
            {
                "address": "192.0.2.5/24",
                "vmid": 100,
                "interface_key": "net0",
                "ip_address": {"address": "192.0.2.5/24"},
            },
            'address: {starts_with: "192.0.2."}',
            'address: {exact: "198.51.100.1/24"}',
        ),
        Case(
            "synced_vlan",
            w["svlan"],
            "vnet zone vlan { vid name }",
            {"vnet": "v5", "zone": "z1", "vlan": {"vid": 5, "name": "v5"}},
            'zone: {exact: "z1"}',
            'zone: {exact: "z2"}',
        ),
        Case(
            "synced_prefix",
            w["sprefix"],
            "vnet subnet prefix { prefix }",
            {"vnet": "v5", "subnet": "s1", "prefix": {"prefix": "203.0.113.0/24"}},
            'subnet: {exact: "s1"}',
            'subnet: {exact: "s2"}',
        ),
    ]


def forbidden_values(w: dict[str, Any]) -> list[str]:
    """The planted plaintext secrets and the ciphertext the database holds for them."""
    ciphertexts = [
        getattr(type(obj).objects.get(pk=obj.pk), column)
        for obj in (w["backend"], w["inventory"], w["endpoint"])
        for column in SECRET_COLUMNS
        if hasattr(obj, column)
    ]
    assert all(ciphertexts) and len(ciphertexts) == 4  # every planted secret is stored
    return [BACKEND_KEY, INVENTORY_TOKEN, PVE_TOKEN, PVE_PASSWORD, *ciphertexts]


@pytest.fixture
def graph(world, superuser) -> Graph:
    return Graph(token_client(superuser), forbidden_values(world))


CASE_NAMES = [
    "backend_endpoint",
    "inventory_endpoint",
    "hv_endpoint",
    "hv_cluster",
    "hv_node",
    "hv_storage",
    "hv_backup",
    "hv_snapshot",
    "hv_task_history",
    "backup_routine",
    "replication",
    "deletion_request",
    "apply_job",
    "synced_virtual_machine",
    "synced_device",
    "synced_interface",
    "synced_virtual_disk",
    "synced_ip_address",
    "synced_vlan",
    "synced_prefix",
]


def test_every_model_has_a_case(world, superuser):
    from django.apps import apps

    covered = {type(case.obj) for case in cases(world, superuser)}
    # the apply path's ledger is internal (no changelog, no list route): outcomes are read by id only;
    # pending retirements are the push's own bookkeeping (C3), retried by the next preflight
    internal = {apps.get_model("netbox_hvsync", m) for m in ("AppliedChangeSet", "PendingRetirement")}
    assert covered == set(apps.get_app_config("netbox_hvsync").get_models()) - internal
    assert [case.query for case in cases(world, superuser)] == CASE_NAMES


@pytest.mark.parametrize("name", CASE_NAMES)
def test_list_filter_and_single_query(graph, world, superuser, name):
    case = next(c for c in cases(world, superuser) if c.query == name)
    pk = str(case.obj.pk)

    rows = graph.data(f"{{ hvsync_{name}_list {{ id display {case.selection} }} }}")[f"hvsync_{name}_list"]
    row = next(r for r in rows if r["id"] == pk)
    assert {k: row[k] for k in case.expected} == case.expected
    assert row["display"] == str(case.obj)

    hit = graph.data(f"{{ hvsync_{name}_list(filters: {{{case.hit}}}) {{ id }} }}")[f"hvsync_{name}_list"]
    assert [r["id"] for r in hit] == [pk]
    miss = graph.data(f"{{ hvsync_{name}_list(filters: {{{case.miss}}}) {{ id }} }}")[f"hvsync_{name}_list"]
    assert pk not in [r["id"] for r in miss]

    single = graph.data(f"{{ hvsync_{name}(id: {pk}) {{ id {case.selection} }} }}")[f"hvsync_{name}"]
    assert single == {"id": pk, **case.expected}


def test_user_without_view_permission_gets_no_rows(world, superuser):
    from users.models import User

    graph = Graph(token_client(User.objects.create_user(username="gql-outsider")), forbidden_values(world))
    for case in cases(world, superuser):
        rows = graph.data(f"{{ hvsync_{case.query}_list {{ id }} }}")[f"hvsync_{case.query}_list"]
        assert rows == [], case.query
        body = graph(f"{{ hvsync_{case.query}(id: {case.obj.pk}) {{ id }} }}")
        assert not (body.get("data") or {}).get(f"hvsync_{case.query}"), case.query
        assert body.get("errors"), case.query


def test_view_permission_on_one_model_shows_only_that_model(world, superuser):
    from django.contrib.contenttypes.models import ContentType
    from users.models import ObjectPermission, User

    user = User.objects.create_user(username="gql-endpoint-viewer")
    permission = ObjectPermission.objects.create(
        name="gql-view-pve-a", actions=["view"], constraints={"name": "pve-a"}
    )
    permission.object_types.set([ContentType.objects.get(app_label="netbox_hvsync", model="hvendpoint")])
    permission.users.add(user)
    graph = Graph(token_client(user), forbidden_values(world))

    rows = graph.data("{ hvsync_hv_endpoint_list { name } }")["hvsync_hv_endpoint_list"]
    assert rows == [{"name": "pve-a"}]  # pve-b is outside the permission's constraint
    assert graph.data("{ hvsync_hv_cluster_list { id } }")["hvsync_hv_cluster_list"] == []


def test_secret_fields_are_no_part_of_the_schema(graph):
    from netbox_hvsync.api import serializers

    query = '{ __type(name: "%s") { fields { name } } }'
    for type_name, serializer in [
        ("BackendEndpointType", serializers.BackendEndpointSerializer),
        ("InventoryEndpointType", serializers.InventoryEndpointSerializer),
        ("HvEndpointType", serializers.HvEndpointSerializer),
    ]:
        fields = {f["name"] for f in graph.data(query % type_name)["__type"]["fields"]}
        hidden = {name for name, field in serializer().fields.items() if field.write_only}
        assert hidden and not hidden & fields, type_name
        assert not {f for f in fields if "ciphertext" in f or f in {"password", "token", "token_value"}}
        # what GraphQL shows is what REST shows (REST's `url` is its API link; GraphQL has none)
        readable = {name for name, field in serializer().fields.items() if not field.write_only}
        assert fields - NETBOX_BASE_FIELDS == readable - {
            "url",
            "display_url",
            "display",
            "tags",
            "custom_fields",
        }, type_name


def test_every_type_mirrors_its_rest_serializer(graph, world, superuser):
    """No GraphQL type shows a field its REST serializer does not (secrets included)."""
    from netbox_hvsync.api import serializers

    serializer_of = {
        model: serializer
        for serializer in vars(serializers).values()
        if isinstance(serializer, type)
        and (model := getattr(getattr(serializer, "Meta", None), "model", None)) is not None
    }
    query = '{ __type(name: "%s") { fields { name } } }'
    for case in cases(world, superuser):
        model = type(case.obj)
        fields = {f["name"] for f in graph.data(query % f"{model.__name__}Type")["__type"]["fields"]}
        readable = {name for name, f in serializer_of[model]().fields.items() if not f.write_only}
        extra = fields - NETBOX_BASE_FIELDS - readable
        assert extra == set(), (case.query, extra)
        assert not {f for f in fields if f.endswith("_ciphertext")}


def test_planted_secrets_never_appear_in_any_response(graph, world, superuser):
    """Every type's every scalar field, listed and single, by introspection: no secret in any body."""
    scalar_query = '{ __type(name: "%s") { fields { name type { kind ofType { kind ofType { kind } } } } } }'

    def scalars(type_name: str) -> list[str]:
        fields = graph.data(scalar_query % type_name)["__type"]["fields"]
        kinds = {}
        for field in fields:
            kind, inner = field["type"]["kind"], field["type"]["ofType"]
            while kind in ("NON_NULL", "LIST") and inner:
                kind, inner = inner["kind"], inner.get("ofType")
            kinds[field["name"]] = kind
        return [name for name, kind in kinds.items() if kind in ("SCALAR", "ENUM")]

    for case in cases(world, superuser):
        names = " ".join(scalars(f"{type(case.obj).__name__}Type"))
        assert "id" in names.split()
        graph.data(f"{{ hvsync_{case.query}_list {{ {names} }} }}")  # Graph refuses any leaked secret
        graph.data(f"{{ hvsync_{case.query}(id: {case.obj.pk}) {{ {names} }} }}")
