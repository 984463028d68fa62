"""List tables, NetBox style: linked names, choice badges, tags, configurable columns."""

from __future__ import annotations

import django_tables2 as tables
from netbox.tables import NetBoxTable, columns

from netbox_hvsync import models


class BackendEndpointTable(NetBoxTable):
    name = tables.Column(linkify=True)
    ip_address = tables.Column(linkify=True, verbose_name="IP address")
    enabled = columns.BooleanColumn()
    verify_ssl = columns.BooleanColumn(verbose_name="Verify TLS")
    key_state = columns.ChoiceFieldColumn()
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:backendendpoint_list")

    class Meta(NetBoxTable.Meta):
        model = models.BackendEndpoint
        fields = (
            "pk",
            "id",
            "name",
            "enabled",
            "url",
            "ip_address",
            "port",
            "verify_ssl",
            "key_state",
            "key_fingerprint",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = ("name", "enabled", "url", "ip_address", "port", "key_state")


class InventoryEndpointTable(NetBoxTable):
    name = tables.Column(linkify=True)
    ip_address = tables.Column(linkify=True, verbose_name="IP address")
    enabled = columns.BooleanColumn()
    verify_ssl = columns.BooleanColumn(verbose_name="Verify TLS")
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:inventoryendpoint_list")

    class Meta(NetBoxTable.Meta):
        model = models.InventoryEndpoint
        fields = (
            "pk",
            "id",
            "name",
            "enabled",
            "scheme",
            "ip_address",
            "domain",
            "port",
            "token_version",
            "token_key",
            "verify_ssl",
            "pushed_credential_fingerprint",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = ("name", "enabled", "ip_address", "domain", "port", "token_version")


class HvEndpointTable(NetBoxTable):
    name = tables.Column(linkify=True)
    ip_address = tables.Column(linkify=True, verbose_name="IP address")
    site = tables.Column(linkify=True)
    tenant = tables.Column(linkify=True)
    enabled = columns.BooleanColumn()
    verify_ssl = columns.BooleanColumn(verbose_name="Verify TLS")
    allow_template_builds = columns.BooleanColumn(verbose_name="Template builds")
    sync_mode_vm = columns.BooleanColumn(verbose_name="Sync VMs")
    sync_mode_vm_template = columns.BooleanColumn(verbose_name="Sync templates")
    gone_policy = columns.ChoiceFieldColumn()
    auto_approve_deletions = columns.BooleanColumn(verbose_name="Auto-approve deletions")
    template_build_grant_confirmed = columns.BooleanColumn(verbose_name="Grant confirmed")
    access_methods = columns.ArrayColumn()
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:hvendpoint_list")

    class Meta(NetBoxTable.Meta):
        model = models.HvEndpoint
        fields = (
            "pk",
            "id",
            "name",
            "enabled",
            "ip_address",
            "domain",
            "port",
            "username",
            "access_methods",
            "token_name",
            "verify_ssl",
            "timeout",
            "max_retries",
            "retry_backoff",
            "sync_mode_vm",
            "sync_mode_vm_template",
            "gone_policy",
            "gone_status",
            "gone_guard_share",
            "auto_approve_deletions",
            "allow_template_builds",
            "template_build_grant_confirmed",
            "site",
            "tenant",
            "backend_id",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = (
            "name",
            "enabled",
            "domain",
            "ip_address",
            "port",
            "username",
            "allow_template_builds",
            "site",
        )


class HvClusterTable(NetBoxTable):
    name = tables.Column(linkify=True)
    endpoint = tables.Column(linkify=True)
    cluster = tables.Column(linkify=True, verbose_name="NetBox cluster")
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:hvcluster_list")

    class Meta(NetBoxTable.Meta):
        model = models.HvCluster
        fields = ("pk", "id", "name", "endpoint", "cluster", "tags", "created", "last_updated")
        default_columns = ("name", "endpoint", "cluster")


class HvNodeTable(NetBoxTable):
    name = tables.Column(linkify=True)
    cluster = tables.Column(linkify=True)
    device = tables.Column(linkify=True)
    online = columns.BooleanColumn()
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:hvnode_list")

    class Meta(NetBoxTable.Meta):
        model = models.HvNode
        fields = (
            "pk",
            "id",
            "name",
            "cluster",
            "node_id",
            "online",
            "device",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = ("name", "cluster", "node_id", "online", "device")


class HvStorageTable(NetBoxTable):
    name = tables.Column(linkify=True)
    cluster = tables.Column(linkify=True)
    content = columns.ArrayColumn()
    shared = columns.BooleanColumn()
    active = columns.BooleanColumn()
    enabled = columns.BooleanColumn()
    nodes = columns.ManyToManyColumn(linkify_item=True)
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:hvstorage_list")

    class Meta(NetBoxTable.Meta):
        model = models.HvStorage
        fields = (
            "pk",
            "id",
            "name",
            "cluster",
            "storage_type",
            "content",
            "shared",
            "active",
            "enabled",
            "total",
            "used",
            "avail",
            "nodes",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = ("name", "cluster", "storage_type", "content", "shared", "active", "total", "used")


class HvBackupTable(NetBoxTable):
    volid = tables.Column(linkify=True)
    storage = tables.Column(linkify=True)
    virtual_machine = tables.Column(linkify=True)
    ctime = columns.DateTimeColumn()
    protected = columns.BooleanColumn()
    verification_state = columns.ChoiceFieldColumn()
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:hvbackup_list")

    class Meta(NetBoxTable.Meta):
        model = models.HvBackup
        fields = (
            "pk",
            "id",
            "volid",
            "storage",
            "vmid",
            "virtual_machine",
            "ctime",
            "size",
            "format",
            "protected",
            "verification_state",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = (
            "volid",
            "storage",
            "vmid",
            "virtual_machine",
            "ctime",
            "size",
            "verification_state",
        )


class HvSnapshotTable(NetBoxTable):
    name = tables.Column(linkify=True)
    virtual_machine = tables.Column(linkify=True)
    snaptime = columns.DateTimeColumn()
    vmstate = columns.BooleanColumn(verbose_name="RAM state")
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:hvsnapshot_list")

    class Meta(NetBoxTable.Meta):
        model = models.HvSnapshot
        fields = (
            "pk",
            "id",
            "name",
            "virtual_machine",
            "parent",
            "snaptime",
            "vmstate",
            "description",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = ("name", "virtual_machine", "parent", "snaptime", "vmstate")


class HvTaskHistoryTable(NetBoxTable):
    upid = tables.Column(linkify=True, verbose_name="UPID")
    endpoint = tables.Column(linkify=True)
    node = tables.Column(linkify=True)
    virtual_machine = tables.Column(linkify=True)
    starttime = columns.DateTimeColumn()
    endtime = columns.DateTimeColumn()
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:hvtaskhistory_list")

    class Meta(NetBoxTable.Meta):
        model = models.HvTaskHistory
        fields = (
            "pk",
            "id",
            "upid",
            "endpoint",
            "node",
            "task_type",
            "vmid",
            "virtual_machine",
            "user",
            "status",
            "starttime",
            "endtime",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = ("task_type", "node", "vmid", "user", "status", "starttime", "endtime")


def job_columns(model: type, identity: str) -> tuple[str, ...]:
    """A Proxmox job model's SPEC fields as table columns: its identity first; raw_config is no column."""
    rest = (f for f in model.spec_fields if f not in (identity, "raw_config"))  # type: ignore[attr-defined]
    return ("pk", "id", identity, *rest, "tags", "created", "last_updated")


class BackupRoutineTable(NetBoxTable):
    job_id = tables.Column(linkify=True, verbose_name="Job ID")
    endpoint = tables.Column(linkify=True)
    node = tables.Column(linkify=True)
    storage = tables.Column(linkify=True)
    fleecing_storage = tables.Column(linkify=True)
    enabled = columns.BooleanColumn()
    status = columns.ChoiceFieldColumn()
    selection = columns.ArrayColumn()
    next_run = columns.DateTimeColumn()
    keep_all = columns.BooleanColumn()
    repeat_missed = columns.BooleanColumn()
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:backuproutine_list")

    class Meta(NetBoxTable.Meta):
        model = models.BackupRoutine
        fields = job_columns(models.BackupRoutine, "job_id")
        default_columns = ("job_id", "endpoint", "enabled", "schedule", "next_run", "storage", "status")


class ReplicationTable(NetBoxTable):
    replication_id = tables.Column(linkify=True, verbose_name="Replication ID")
    endpoint = tables.Column(linkify=True)
    virtual_machine = tables.Column(linkify=True)
    hv_node = tables.Column(linkify=True, verbose_name="Node")
    job_type = columns.ChoiceFieldColumn()
    remove_job = columns.ChoiceFieldColumn()
    status = columns.ChoiceFieldColumn()
    disable = columns.BooleanColumn(verbose_name="Disabled")
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:replication_list")

    class Meta(NetBoxTable.Meta):
        model = models.Replication
        fields = job_columns(models.Replication, "replication_id")
        default_columns = (
            "replication_id",
            "virtual_machine",
            "source",
            "target",
            "schedule",
            "disable",
            "status",
        )


class DeletionRequestTable(NetBoxTable):
    object_repr = tables.Column(linkify=True, verbose_name="Object")
    object_type = columns.ContentTypeColumn()
    endpoint = tables.Column(linkify=True)
    status = columns.ChoiceFieldColumn()
    requested_by = tables.Column()
    decided_by = tables.Column()
    decided_at = columns.DateTimeColumn()
    gone_since = columns.DateTimeColumn()
    applied_at = columns.DateTimeColumn()
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:deletionrequest_list")

    class Meta(NetBoxTable.Meta):
        model = models.DeletionRequest
        fields = (
            "pk",
            "id",
            "object_repr",
            "object_type",
            "object_id",
            "endpoint",
            "identity",
            "run_id",
            "reason",
            "gone_since",
            "status",
            "requested_by",
            "decided_by",
            "decided_at",
            "comment",
            "applied_at",
            "error",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = (
            "object_repr",
            "object_type",
            "endpoint",
            "status",
            "gone_since",
            "requested_by",
            "decided_by",
            "created",
        )


class ApplyJobTable(NetBoxTable):
    id = tables.Column(linkify=True, verbose_name="ID")
    endpoint = tables.Column(linkify=True)
    status = columns.ChoiceFieldColumn()
    started = columns.DateTimeColumn()
    finished = columns.DateTimeColumn()
    tags = columns.TagColumn(url_name="plugins:netbox_hvsync:applyjob_list")
    actions = columns.ActionsColumn(actions=("delete",))  # written by the backend only: no edit page

    class Meta(NetBoxTable.Meta):
        model = models.ApplyJob
        fields = (
            "pk",
            "id",
            "endpoint",
            "status",
            "started",
            "finished",
            "error",
            "tags",
            "created",
            "last_updated",
        )
        default_columns = ("id", "endpoint", "status", "started", "finished", "error")


#
# Sidecars (no tags or custom fields)
#


class SyncedObjectTable(NetBoxTable):
    id = tables.Column(linkify=True, verbose_name="ID")
    endpoint = tables.Column(linkify=True)
    last_seen = columns.DateTimeColumn()
    gone_since = columns.DateTimeColumn(verbose_name="Gone since")
    actions = columns.ActionsColumn(actions=("delete",))


def _sidecar_table(model_class: type, target: str, *identity: str) -> type:
    attrs = {
        target: tables.Column(linkify=True),
        "Meta": type(
            "Meta",
            (NetBoxTable.Meta,),
            {
                "model": model_class,
                "fields": (
                    "pk",
                    "id",
                    "endpoint",
                    target,
                    *identity,
                    "last_seen",
                    "gone_since",
                    "gone_request",
                    "gone_prior_status",
                    "last_run_id",
                    "created",
                    "last_updated",
                ),
                "default_columns": ("id", "endpoint", target, *identity, "last_seen", "gone_since"),
            },
        ),
    }
    return type(f"{model_class.__name__}Table", (SyncedObjectTable,), attrs)


SyncedVirtualMachineTable = _sidecar_table(
    models.SyncedVirtualMachine, "virtual_machine", "vmid", "vm_type", "node_name", "is_template"
)
SyncedDeviceTable = _sidecar_table(models.SyncedDevice, "device", "node_name")
SyncedInterfaceTable = _sidecar_table(
    models.SyncedInterface, "vm_interface", "interface", "vmid", "node_name", "key"
)
SyncedVirtualDiskTable = _sidecar_table(models.SyncedVirtualDisk, "virtual_disk", "vmid", "key")
SyncedIPAddressTable = _sidecar_table(
    models.SyncedIPAddress, "ip_address", "vmid", "node_name", "interface_key", "address"
)
SyncedVLANTable = _sidecar_table(models.SyncedVLAN, "vlan", "zone", "vnet")
SyncedPrefixTable = _sidecar_table(models.SyncedPrefix, "prefix", "vnet", "subnet")
