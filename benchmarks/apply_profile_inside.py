"""Runs inside NetBox (`netbox shell`), started by bench_apply_profile.py: what one object costs on the
apply path, per kind, in the order a sync writes them.

It posts what an initial sync of N guests sends (VMs with tags and the key custom field, their sidecars,
two NICs with MACs, two disks, one IP, then each VM's primary IP) to `change-sets/` through Django's test
client (the whole request: middleware, serializers, changelog, search, events), one change set per stage
of up to 1,000 operations. Per kind: wall seconds, milliseconds and SQL queries per object, the tables
the queries touch most; for the VM stage, the functions cProfile finds most expensive (cumulative).
Writes the JSON to the path in HVSYNC_PROFILE_OUT.
"""

from __future__ import annotations

import collections
import cProfile
import json
import os
import pstats
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

ROUTE = "/api/plugins/hvsync/change-sets/"
GUESTS = int(os.environ.get("HVSYNC_PROFILE_VMS", "200"))
PROBE_GUESTS = int(os.environ.get("HVSYNC_PROBE_VMS", "1000"))
KEY = "hvsync_key"
#: What an initial sync writes per guest of the `large` scenario (13,110 objects for 1,000 VMs): the VM and
#: its primary-IP update, 2 NICs, 2 disks, 1 IP, and a sync-state sidecar for each of the VM, NICs, disks
#: and IP. Only the VM's sidecar is timed here; the other five are counted at its cost (they are plugin
#: models of the same shape, not measured apart).
SYNC_GUEST = {
    "virtual machine": 1,
    "virtual machine sidecar": 6,
    "vm interface": 2,
    "vm disk": 2,
    "ip address": 1,
    "primary ip (update)": 1,
}
TABLE = re.compile(r'(?:FROM|INTO|UPDATE)\s+"([a-z0-9_]+)"', re.IGNORECASE)


def fixtures() -> dict[str, Any]:
    from dcim.models import DeviceRole, Platform, Site
    from extras.models import CustomField, Tag
    from ipam.models import IPAddress
    from netbox_hvsync.models import HvEndpoint
    from users.models import User
    from virtualization.models import Cluster, ClusterType, VirtualDisk, VirtualMachine, VMInterface

    try:
        from core.models import ObjectType
    except ImportError:  # pragma: no cover - every release this runs on has it
        from django.contrib.contenttypes.models import ContentType as ObjectType

    user = User.objects.create_superuser("profile", "profile@example.com", "profile-password")
    site = Site.objects.create(name="profile-site", slug="profile-site")
    ctype = ClusterType.objects.create(name="Proxmox VE", slug="proxmox-ve")
    cluster = Cluster.objects.create(name="profile", type=ctype)
    role = DeviceRole.objects.create(name="Proxmox VM", slug="proxmox-vm", vm_role=True)
    platform = Platform.objects.create(name="Proxmox l26", slug="pve-l26")
    Tag.objects.create(name="hvsync", slug="hvsync")
    field = CustomField.objects.create(name=KEY, type="text")
    field.object_types.set(
        ObjectType.objects.get_for_model(m) for m in (VirtualMachine, VMInterface, VirtualDisk, IPAddress)
    )
    endpoint = HvEndpoint.objects.create(name="profile", username="root@pam")
    return {
        "user": user,
        "site": site.pk,
        "cluster": cluster.pk,
        "role": role.pk,
        "platform": platform.pk,
        "endpoint": endpoint.pk,
    }


def create(path: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"op": "create", "path": path, "data": data}


def stages(ids: dict[str, Any], phase: int, guests: int = GUESTS) -> list[tuple[str, Any]]:
    """What the sync sends, stage by stage (the backend's bodies, ids resolved as it resolves them);
    each phase writes its own guests (names, MACs and addresses apart)."""
    from virtualization.models import VirtualMachine, VMInterface

    tags = [{"slug": "hvsync"}]
    prefix = f"p{phase}-"
    skip = len(prefix)
    out: list[tuple[str, Any]] = []
    out.append(
        (
            "virtual machine",
            lambda: [
                create(
                    "virtualization/virtual-machines",
                    {
                        "name": f"{prefix}{n}",
                        "status": "active",
                        "cluster": ids["cluster"],
                        "site": ids["site"],
                        "vcpus": 2,
                        "memory": 2048,
                        "role": ids["role"],
                        "platform": ids["platform"],
                        "tags": tags,
                        "custom_fields": {KEY: f"{prefix}pve|vm|{n}"},
                    },
                )
                for n in range(guests)
            ],
        )
    )
    vm_ids = lambda: dict(VirtualMachine.objects.filter(name__startswith=prefix).values_list("name", "pk"))  # noqa: E731
    out.append(
        (
            "virtual machine sidecar",
            lambda: [
                create(
                    "plugins/hvsync/synced-virtual-machines",
                    {
                        "endpoint": ids["endpoint"],
                        "virtual_machine": pk,
                        "vmid": phase * 100_000 + int(name[skip:]),
                        "node_name": "pve1",
                        "vm_type": "qemu",
                    },
                )
                for name, pk in vm_ids().items()
            ],
        )
    )

    def children(kind: str, path: str, body: Any) -> tuple[str, Any]:
        """Two of `path` per guest VM (its NICs or disks); `body(n, i)` is the rest of the i-th one's body."""
        return (
            kind,
            lambda: [
                create(path, {"virtual_machine": pk, **body(int(name[skip:]), i), "tags": tags})
                for name, pk in vm_ids().items()
                for i in range(2)
            ],
        )

    out.append(
        children(
            "vm interface",
            "virtualization/interfaces",
            lambda n, i: {
                "name": f"net{i}",
                "enabled": True,
                "mac_address": f"BC:24:1{phase}:{n // 256:02X}:{n % 256:02X}:{i:02X}",
                "description": "bridge vmbr0, virtio",
                "custom_fields": {KEY: f"{prefix}pve|vm|{n}|nic|net{i}"},
            },
        )
    )
    out.append(
        children(
            "vm disk",
            "virtualization/virtual-disks",
            lambda n, i: {
                "name": f"scsi{i}",
                "size": 32768,
                "custom_fields": {KEY: f"{prefix}pve|vm|{n}|disk|scsi{i}"},
            },
        )
    )
    out.append(
        (
            "ip address",
            lambda: [
                create(
                    "ipam/ip-addresses",
                    {
                        "address": f"10.{phase * 50 + int(name[skip:]) // 250}.{int(name[skip:]) % 250 + 1}.10/24",
                        "status": "active",
                        "assigned_object_type": "virtualization.vminterface",
                        "assigned_object_id": pk,
                        "tags": tags,
                        "custom_fields": {KEY: f"pve|ip|{name}"},
                    },
                )
                for name, pk in VMInterface.objects.filter(name="net0")
                .values_list("virtual_machine__name", "pk")
                .filter(virtual_machine__name__startswith=prefix)
            ],
        )
    )
    out.append(
        (
            "primary ip (update)",
            lambda: [
                {
                    "op": "update",
                    "path": "virtualization/virtual-machines",
                    "id": vm,
                    "data": {"primary_ip4": ip},
                }
                for vm, ip in VMInterface.objects.filter(
                    name="net0", ip_addresses__isnull=False, virtual_machine__name__startswith=prefix
                ).values_list("virtual_machine_id", "ip_addresses__pk")
            ],
        )
    )
    return out


def tables(queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The statements a kind runs most, by verb and table, each with one example."""
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    for query in queries:
        sql = query["sql"]
        verb = sql.split(None, 1)[0].upper()
        match = TABLE.search(sql)
        label = f"{verb} {match.group(1) if match else '?'}"
        counts[label] += 1
        examples.setdefault(label, sql[:300])
    return [{"statement": k, "count": n, "example": examples[k]} for k, n in counts.most_common(15)]


def per_object_functions(profile: cProfile.Profile, objects: int, limit: int = 40) -> list[str]:
    """Functions called at least once per object, by cumulative time per object: where an object's time
    goes (the request's own call chain, called once, is left out)."""
    functions = pstats.Stats(profile).get_stats_profile().func_profiles
    rows = []
    for name, function in functions.items():
        calls = int(str(function.ncalls).split("/")[0])  # "total/primitive" when recursive
        if calls >= objects:
            short = function.file_name.split("site-packages/")[-1].split("/src/")[-1]
            rows.append((function.cumtime, calls, f"{short}:{function.line_number}({name})"))
    rows.sort(reverse=True)
    return [
        f"{1000 * cum / objects:8.2f} ms/object {calls / objects:6.1f} calls/object  {where}"
        for cum, calls, where in rows[:limit]
    ]


def token_client(user: Any) -> Client:
    """A client carrying a v2 API token, as the backend does (the route requires token auth)."""
    from users.models import Token

    token = Token(user=user, version=2, write_enabled=True)
    plaintext = Token.generate()
    token.token = plaintext
    token.save()
    return Client(HTTP_AUTHORIZATION=f"Bearer nbt_{token.key}.{plaintext}")


def post(client: Client, operations: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Apply the operations as change sets of up to 1,000; the (path, id) of every object written."""
    written = []
    for start in range(0, len(operations), 1000):
        chunk = operations[start : start + 1000]
        body = {"version": 1, "id": str(uuid.uuid4()), "operations": chunk}
        answer = client.post(ROUTE, data=json.dumps(body), content_type="application/json")
        assert answer.status_code == 200, answer.content[:2000]
        written += [(chunk[r["index"]]["path"], r["id"]) for r in answer.json()["results"]]
    return written


@contextmanager
def as_in_a_request(user: Any) -> Iterator[Any]:
    """A request as NetBox's own request processor wraps it (`event_tracking`: the request, its events
    queue, and its cache of object types and custom fields). Without that cache every object's
    validation reads its model's custom fields again, which no request does (NetBox 4.7)."""
    from django.test import RequestFactory
    from netbox.context_managers import event_tracking

    request = RequestFactory().post(ROUTE)
    request.user, request.id = user, uuid.uuid4()
    with event_tracking(request):
        yield request


def kept_work(written: list[tuple[str, int]], user: Any) -> dict[str, float]:
    """Milliseconds per object of the work any write path keeps when it keeps what the apply path
    promises, timed alone (no request handling, no save, but with NetBox's request cache, as any writer
    running in a request or job has it) on objects a phase wrote: the model's validation
    (`clean_fields` and `clean`, custom fields included), its unique constraints, and one changelog
    snapshot (`to_objectchange`). Each object is validated and snapshotted once untimed first, so its
    related objects and tags are in memory (as in the serializer): what is timed is a floor, not a cost
    a real save could avoid."""
    from netbox_hvsync.api.routes import target

    by_path: dict[str, list[int]] = collections.defaultdict(list)
    for path, pk in written:
        by_path[path].append(pk)
    instances = []
    for path, pks in by_path.items():
        model = target(path).model
        queryset = model.objects.filter(pk__in=pks)
        if any(field.name == "tags" for field in model._meta.get_fields()):
            queryset = queryset.prefetch_related("tags")
        instances += list(queryset)
    timings = {"clean": 0.0, "constraints": 0.0, "changelog": 0.0}
    with as_in_a_request(user):
        _time_kept_work(instances, timings)
    return {f"{name}_ms": round(1000 * seconds / len(instances), 2) for name, seconds in timings.items()}


def _time_kept_work(instances: list[Any], timings: dict[str, float]) -> None:
    """A first untimed pass loads what validation and the snapshot read; the second is timed."""
    for timed in (False, True):
        for instance in instances:
            began = time.perf_counter()
            instance.clean_fields()
            instance.clean()
            cleaned = time.perf_counter()
            instance.validate_unique()
            instance.validate_constraints()
            constrained = time.perf_counter()
            if hasattr(instance, "to_objectchange"):
                instance.to_objectchange("update")
            done = time.perf_counter()
            if timed:
                timings["clean"] += cleaned - began
                timings["constraints"] += constrained - cleaned
                timings["changelog"] += done - constrained


#: The bulk probes, in the order they run (each on its own guests): results key, what it keeps, options
PROBES: tuple[tuple[str, str, dict[str, bool]], ...] = (
    ("bulk_probe", "in bulk", {}),
    ("bulk_probe_with_signals", "in bulk, keeping the signals", {"keep_signals": True}),
    (
        "bulk_probe_with_signals_tags_first",
        "in bulk, keeping the signals, tags before the saves",
        {"keep_signals": True, "tags_first": True},
    ),
    (
        "bulk_probe_with_signals_changelog_in_bulk",
        "in bulk, keeping the signals but the changelog's",
        {"keep_signals": True, "tags_first": True, "changelog_in_bulk": True},
    ),
)


def bulk_probe(
    ids: dict[str, Any],
    phase: int = 4,
    guests: int = PROBE_GUESTS,
    keep_signals: bool = False,
    tags_first: bool = False,
    changelog_in_bulk: bool = False,
) -> dict[str, Any]:
    """A measurement, not a writer hvsync ships: how long the same guests take written in bulk while
    keeping the per-object work the apply path promises, so "could a bulk writer reach 10x?" has a
    number instead of an estimate.

    Per object it keeps: `full_clean()` (fields, `clean()`, custom fields; the IP's duplicate check and
    the VM's primary-IP check included), tags, one changelog row per create and per update the sync
    makes (the VM's primary IP, the NIC's primary MAC) carrying one request id, the search index, and
    what NetBox's signals would have kept up (the VM's interface and disk counters, its disk total).
    Each change is queued for event rules as NetBox queues it (none exist here, so none fire). Unique
    constraints are checked once per kind in one query. It runs as inside a request (NetBox's request
    cache and events queue) and in one transaction. It leaves out what a shipped writer would add:
    parsing the change set, object permissions, netbox-branching's diffs, the signals of other plugins,
    and anything release-specific (it runs on the release the profile runs on, 4.7).

    `keep_signals`: instead of writing the changelog, events, search index and counters itself, it sends
    each object's `post_save` (and its tags' `m2m_changed`, as taggit sends them) after the bulk insert,
    so every receiver runs as after `save()`: NetBox's own, other plugins', netbox-branching's on the
    changelog rows. What it still saves is the serializer and one INSERT per object.

    `tags_first` (with `keep_signals`): each object's tags are written before its `post_save`, so
    NetBox's changelog receiver writes the create's row with the tags in it once, as REST's row ends up,
    instead of writing it and rewriting it on the tags' `post_add`. The tags' `pre_add` (NetBox checks
    that a tag may go on that kind) is still sent; their `post_add` is not: for a new object it only
    rewrites that row, invalidates a VM's config context (its `post_save` has already done it) and runs
    what another plugin connects to it.

    `changelog_in_bulk` (with both): every receiver runs except NetBox's changelog receiver
    (`handle_changed_object`), whose work the probe does itself as the pure probe does: one snapshot per
    change, its events queued, the rows inserted in bulk. Bulk inserts send no `post_save` for those rows:
    netbox-branching's receiver there returns at once for a create outside a branch; for an update it
    would refresh open branches' diffs of the object (none exist here), which a shipped writer would run."""
    assert keep_signals or not (tags_first or changelog_in_bulk), "both only change which signals are sent"
    from core.events import OBJECT_CREATED, OBJECT_UPDATED
    from core.models import ObjectChange
    from core.signals import handle_changed_object
    from dcim.models import DeviceRole, MACAddress, Platform, Site
    from django.contrib.contenttypes.models import ContentType
    from django.db import router, transaction
    from django.db.models.signals import m2m_changed, post_save
    from extras.events import enqueue_event
    from extras.models import Tag, TaggedItem
    from ipam.models import IPAddress
    from netbox.context import events_queue
    from netbox.search.backends import search_backend
    from netbox_hvsync.models import (
        HvEndpoint,
        SyncedInterface,
        SyncedIPAddress,
        SyncedVirtualDisk,
        SyncedVirtualMachine,
    )
    from users.models import User
    from virtualization.models import Cluster, VirtualDisk, VirtualMachine, VMInterface

    seconds: collections.Counter[str] = collections.Counter()
    by_receiver: collections.Counter[str] = collections.Counter()  # the signals' time, per receiver

    def send(signal: Any, sender: Any, **named: Any) -> None:
        """`signal.send(...)`, timing each receiver, so the signals' time says whose work it is (a
        receiver's time includes the signals its own saves send, e.g. the changelog row's)."""
        sync_receivers, async_receivers = signal._live_receivers(sender)
        assert not async_receivers, async_receivers  # send() would run these too; none are connected
        for receiver in sync_receivers:
            if changelog_in_bulk and receiver is handle_changed_object:
                continue  # its changelog rows and events are written in bulk (`log`)
            began = time.perf_counter()
            receiver(signal=signal, sender=sender, **named)
            name = getattr(receiver, "__qualname__", type(receiver).__qualname__)
            by_receiver[f"{getattr(receiver, '__module__', '?')}.{name}"] += time.perf_counter() - began

    @contextmanager
    def part(name: str) -> Iterator[None]:
        began = time.perf_counter()
        yield
        seconds[name] += time.perf_counter() - began

    user = User.objects.get(pk=ids["user"].pk)
    site, cluster = Site.objects.get(pk=ids["site"]), Cluster.objects.get(pk=ids["cluster"])
    role, platform = DeviceRole.objects.get(pk=ids["role"]), Platform.objects.get(pk=ids["platform"])
    endpoint, tag = HvEndpoint.objects.get(pk=ids["endpoint"]), Tag.objects.get(slug="hvsync")
    prefix = f"p{phase}-"
    snapshots: list[Any] = []  # changelog rows, in the order the writes happen

    def validated(objects: list[Any]) -> list[Any]:
        with part("validate (full_clean)"):
            for obj in objects:
                obj.full_clean(validate_unique=False, validate_constraints=False)
        return objects

    def insert(model: Any, objects: list[Any], tagged: bool = False) -> None:
        with part("insert"):
            model.objects.bulk_create(objects)
        if tagged and tags_first:
            tag_all(model, objects, actions=("pre_add",))
        saved(model, objects, created=True)
        if tagged and not tags_first:
            tag_all(model, objects, actions=("pre_add", "post_add"))
        if not keep_signals or changelog_in_bulk:
            log(objects, "create")

    def tag_all(model: Any, objects: list[Any], actions: tuple[str, ...]) -> None:
        with part("tags"):
            kind = ContentType.objects.get_for_model(model)
            TaggedItem.objects.bulk_create(
                [TaggedItem(tag=tag, content_type=kind, object_id=obj.pk) for obj in objects]
            )
            for obj in objects:
                obj._tags = [tag]  # what the snapshot and the search index read
        if keep_signals:
            # taggit sends pre_add before its rows; in one transaction a refusal still undoes them
            alias = router.db_for_write(model)
            with part("signals"):
                for obj in objects:
                    for action in actions:
                        send(
                            m2m_changed,
                            sender=TaggedItem,
                            action=action,
                            instance=obj,
                            reverse=False,
                            model=Tag,
                            pk_set={tag.pk},
                            using=alias,
                        )

    def update(model: Any, objects: list[Any], fields: list[str]) -> None:
        with part("insert"):
            model.objects.bulk_update(objects, fields)
        saved(model, objects, created=False)
        if not keep_signals or changelog_in_bulk:
            log(objects, "update")

    def saved(model: Any, objects: list[Any], created: bool) -> None:
        """What `save()` sends its receivers, when the probe keeps them."""
        if keep_signals:
            alias = router.db_for_write(model)
            with part("signals"):
                for obj in objects:
                    send(
                        post_save,
                        sender=model,
                        instance=obj,
                        created=created,
                        update_fields=None,
                        raw=False,
                        using=alias,
                    )

    def log(objects: list[Any], action: str) -> None:
        with part("changelog snapshot"):
            for obj in objects:
                change = obj.to_objectchange(action)
                change.user, change.user_name, change.request_id = user, user.username, request.id
                snapshots.append(change)
        with part("events (queued)"):
            event = OBJECT_CREATED if action == "create" else OBJECT_UPDATED
            for obj in objects:
                enqueue_event(events_queue.get(), obj, request, event)

    def snapshot(objects: list[Any]) -> None:
        """An update's changelog row carries the object as it was (the apply path snapshots too)."""
        with part("changelog snapshot"):
            for obj in objects:
                obj.snapshot()

    began = time.perf_counter()
    with as_in_a_request(user) as request:
        with transaction.atomic():
            vms = validated(
                [
                    VirtualMachine(
                        name=f"{prefix}{n}",
                        status="active",
                        cluster=cluster,
                        site=site,
                        vcpus=2,
                        memory=2048,
                        role=role,
                        platform=platform,
                        custom_field_data={KEY: f"{prefix}pve|vm|{n}"},
                    )
                    for n in range(guests)
                ]
            )
            with part("unique checks (one query per kind)"):
                assert not VirtualMachine.objects.filter(
                    cluster=cluster, name__in=[v.name for v in vms]
                ).exists()
            insert(VirtualMachine, vms, tagged=True)

            def two_per_guest(model: Any, label: str, kind: str, **fields: Any) -> list[Any]:
                """A guest's two NICs or disks (`net0`, `net1`; `scsi0`, `scsi1`), keyed as the sync keys them."""
                return validated(
                    [
                        model(
                            virtual_machine=vm,
                            name=f"{label}{i}",
                            custom_field_data={KEY: f"{prefix}pve|vm|{n}|{kind}|{label}{i}"},
                            **fields,
                        )
                        for n, vm in enumerate(vms)
                        for i in range(2)
                    ]
                )

            nics = two_per_guest(VMInterface, "net", "nic", enabled=True, description="bridge vmbr0, virtio")
            insert(VMInterface, nics, tagged=True)
            macs = validated(
                [
                    MACAddress(
                        mac_address=f"BC:24:1{phase}:{(k // 2) // 256:02X}:{(k // 2) % 256:02X}:{k % 2:02X}",
                        assigned_object=nic,
                    )
                    for k, nic in enumerate(nics)
                ]
            )
            insert(MACAddress, macs)
            snapshot(nics)
            for nic, mac in zip(nics, macs, strict=True):
                nic.primary_mac_address = mac
            update(VMInterface, nics, ["primary_mac_address"])
            disks = two_per_guest(VirtualDisk, "scsi", "disk", size=32768)
            insert(VirtualDisk, disks, tagged=True)
            ips = validated(
                [
                    IPAddress(
                        # 10.200-203 (phase 4), 10.216-219 (5) ... 10.248-251 (7): clear of the stages' 10.0-150
                        address=f"10.{200 + 16 * (phase - 4) + n // 250}.{n % 250 + 1}.10/24",
                        status="active",
                        assigned_object=nics[2 * n],
                        custom_field_data={KEY: f"pve|ip|{prefix}{n}"},
                    )
                    for n in range(guests)
                ]
            )
            insert(IPAddress, ips, tagged=True)
            if keep_signals:  # NetBox's receivers kept the counters and disk total in the rows, not in memory
                with part("signals"):
                    kept = VirtualMachine.objects.filter(pk__in=[vm.pk for vm in vms]).values_list(
                        "pk", "interface_count", "virtual_disk_count", "disk"
                    )
                    by_pk = {pk: rest for pk, *rest in kept}
                    for vm in vms:
                        vm.interface_count, vm.virtual_disk_count, vm.disk = by_pk[vm.pk]
            snapshot(vms)
            if not keep_signals:
                for vm in vms:
                    vm.interface_count = vm.virtual_disk_count = 2  # what the counter-cache signals keep
                    vm.disk = 2 * 32768  # what the virtual-disk signal keeps
            for vm, ip in zip(vms, ips, strict=True):
                vm.primary_ip4 = ip
            with part("validate (full_clean)"):
                for vm in vms:
                    vm.clean()  # the primary IP must be one of the VM's own
            update(
                VirtualMachine,
                vms,
                ["primary_ip4"]
                if keep_signals
                else ["primary_ip4", "interface_count", "virtual_disk_count", "disk"],
            )
            sidecar = {"endpoint": endpoint}
            insert(
                SyncedVirtualMachine,
                validated(
                    [
                        SyncedVirtualMachine(
                            **sidecar, virtual_machine=vm, vmid=phase * 100_000 + n, node_name="pve1"
                        )
                        for n, vm in enumerate(vms)
                    ]
                ),
            )
            insert(
                SyncedInterface,
                validated(
                    [
                        SyncedInterface(
                            **sidecar, vm_interface=nic, vmid=phase * 100_000 + k // 2, key=nic.name
                        )
                        for k, nic in enumerate(nics)
                    ]
                ),
            )
            insert(
                SyncedVirtualDisk,
                validated(
                    [
                        SyncedVirtualDisk(
                            **sidecar, virtual_disk=disk, vmid=phase * 100_000 + k // 2, key=disk.name
                        )
                        for k, disk in enumerate(disks)
                    ]
                ),
            )
            insert(
                SyncedIPAddress,
                validated(
                    [
                        SyncedIPAddress(
                            **sidecar,
                            ip_address=ip,
                            vmid=phase * 100_000 + n,
                            interface_key="net0",
                            address=str(ip.address),
                        )
                        for n, ip in enumerate(ips)
                    ]
                ),
            )
            with part("changelog insert"):
                ObjectChange.objects.bulk_create(snapshots, batch_size=2000)
            if keep_signals:  # NetBox's search receivers deferred it to the commit, as for change-sets/
                indexed = 0
            else:
                with part("search index"):
                    indexed = sum(
                        search_backend.cache(objects, remove_existing=False)
                        for objects in (vms, nics, macs, disks, ips)
                    )
        total = time.perf_counter() - began  # committed; the request's event flush is not timed
    # Counted as the sync counts its writes (13 per guest): each VM, NIC, disk and IP with its sidecar,
    # and the VM's primary-IP update; the MACs and the NICs' primary-MAC updates are NetBox's own.
    objects = 2 * sum(map(len, (vms, nics, disks, ips))) + len(vms)
    # What landed: what a sync of these guests must leave behind, whoever wrote the rows and counters.
    landed = VirtualMachine.objects.filter(
        name__startswith=prefix,
        primary_ip4__isnull=False,
        interface_count=2,
        virtual_disk_count=2,
        disk=65536,
    )
    assert landed.count() == guests
    changelog_rows = ObjectChange.objects.filter(request_id=request.id).count()
    assert changelog_rows == 17 * guests, changelog_rows  # 14 creates and 3 updates per guest
    # each VM's create row ends with its tags in it, as REST's does (however the writer got them there)
    untagged = (
        ObjectChange.objects.filter(
            request_id=request.id,
            changed_object_type=ContentType.objects.get_for_model(VirtualMachine),
            action="create",
        )
        .exclude(postchange_data__tags=[tag.name])
        .count()
    )
    assert untagged == 0, untagged
    return {
        "keep_signals": keep_signals,
        "tags_first": tags_first,
        "changelog_in_bulk": changelog_in_bulk,
        "guests": guests,
        "objects_written": objects,
        "changelog_rows": changelog_rows,
        "search_rows": None if keep_signals else indexed,  # with signals: indexed after the commit
        "seconds": round(total, 2),
        "ms_per_guest": round(1000 * total / guests, 2),
        "seconds_by_part": {name: round(s, 2) for name, s in seconds.most_common()},
        "signal_seconds_by_receiver": {name: round(s, 2) for name, s in by_receiver.most_common()},
    }


def main() -> None:
    """After a small warm-up, three phases of the same writes on their own guests: timed (no
    instrumentation), queries captured, cProfiled; instrumentation slows a request, so the time comes
    from the first alone."""
    ids = fixtures()
    client = token_client(ids["user"])
    report: dict[str, dict[str, Any]] = {}
    for _, build in stages(ids, 0, guests=5):  # warm-up: the process's first requests import and cache
        post(client, build())
    for kind, build in stages(ids, 1):
        operations = build()
        began = time.perf_counter()
        written = post(client, operations)
        seconds = time.perf_counter() - began
        report[kind] = {
            "kind": kind,
            "objects": len(operations),
            "seconds": round(seconds, 2),
            "ms_per_object": round(1000 * seconds / len(operations), 2),
            "kept_work": kept_work(written, ids["user"]),
        }
    for kind, build in stages(ids, 2):
        operations = build()
        connection.queries_log = collections.deque(maxlen=10_000_000)  # the default keeps 9,000
        with CaptureQueriesContext(connection) as captured:
            post(client, operations)
        report[kind]["queries_per_object"] = round(len(captured.captured_queries) / len(operations), 1)
        report[kind]["queries_by_table"] = tables(captured.captured_queries)
    for kind, build in stages(ids, 3):
        operations = build()
        profile = cProfile.Profile()
        profile.enable()
        post(client, operations)
        profile.disable()
        report[kind]["per_object_functions"] = per_object_functions(profile, len(operations))
    probes = {
        key: {"label": label, **bulk_probe(ids, phase=4 + n, **options)}
        for n, (key, label, options) in enumerate(PROBES)
    }
    for row in report.values():
        print(
            f"{row['kind']:24} {row['objects']:6} objects {row['ms_per_object']:7.2f} ms/object"
            f" {row['queries_per_object']:5.1f} queries/object"
        )
    total_objects = sum(r["objects"] for r in report.values())
    total_seconds = sum(r["seconds"] for r in report.values())
    # The floor: validation and one changelog snapshot per object (unique constraints are left out: a
    # bulk writer could check a whole batch's in one query), for what an initial sync writes per guest.
    floor_ms = {
        kind: r["kept_work"]["clean_ms"] + r["kept_work"]["changelog_ms"] for kind, r in report.items()
    }
    guest_ms = sum(count * floor_ms[kind] for kind, count in SYNC_GUEST.items())
    applied_ms = sum(count * report[kind]["ms_per_object"] for kind, count in SYNC_GUEST.items())
    cpus = os.cpu_count() or 1
    summary = {
        "guests": GUESTS,
        "objects": total_objects,
        "seconds": round(total_seconds, 2),
        "objects_per_second": round(total_objects / total_seconds, 1),
        "kept_work_floor": {
            "objects_per_guest": SYNC_GUEST,
            "ms_per_guest": round(guest_ms, 2),
            "apply_ms_per_guest": round(applied_ms, 2),  # the same guest through change-sets/, one stream
            "cpus": cpus,
            # 1,000 guests x ms / 1,000, spread over every CPU: a floor that assumes perfect parallelism
            "seconds_for_1000_guests": round(guest_ms / cpus, 1),
        },
        "stages": list(report.values()),
        **probes,
    }
    out = os.environ.get("HVSYNC_PROFILE_OUT")
    if out:
        with open(out, "w") as handle:
            json.dump(summary, handle, indent=2)
    print(
        f"total {total_objects} objects in {total_seconds:.1f} s: {summary['objects_per_second']} objects/s"
    )
    for row in report.values():
        kept = row["kept_work"]
        print(
            f"{row['kind']:24} kept work: clean {kept['clean_ms']:.2f} ms, constraints"
            f" {kept['constraints_ms']:.2f} ms, changelog snapshot {kept['changelog_ms']:.2f} ms per object"
        )
    floor = summary["kept_work_floor"]
    print(
        f"one synced guest ({sum(SYNC_GUEST.values())} objects) through change-sets/:"
        f" {floor['apply_ms_per_guest']} ms; its floor (clean + one changelog snapshot):"
        f" {floor['ms_per_guest']} ms; 1,000 guests: {floor['seconds_for_1000_guests']} s on {cpus} CPUs"
        " with nothing else running"
    )
    for row in probes.values():
        name = f"bulk probe, {row['label']}"
        print(
            f"{name}: {row['guests']} guests ({row['objects_written']} objects, {row['changelog_rows']}"
            f" changelog rows) in {row['seconds']} s on one stream ({row['ms_per_guest']} ms per guest);"
            f" by part: {row['seconds_by_part']}"
        )
        if row["signal_seconds_by_receiver"]:
            print(f"{name}, the signals' seconds by receiver: {row['signal_seconds_by_receiver']}")


main()
