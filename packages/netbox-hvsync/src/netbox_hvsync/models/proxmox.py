"""Proxmox data mirrored into NetBox by the backend: clusters, nodes, storage, backups, jobs."""

from __future__ import annotations

import re
from typing import ClassVar

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from netbox.models import NetBoxModel

from netbox_hvsync.choices import (
    BackupVerificationChoices,
    PbsChangeDetectionModeChoices,
    RemoveJobChoices,
    ReplicationJobTypeChoices,
    SyncedStatusChoices,
)
from netbox_hvsync.wire import PLUGIN_RECORDS

__all__ = (
    "BackupRoutine",
    "HvBackup",
    "HvCluster",
    "HvNode",
    "HvSnapshot",
    "HvStorage",
    "HvTaskHistory",
    "Replication",
)

REPLICATION_ID_RE = re.compile(r"^(\d+)-(\d+)$")


class HvCluster(NetBoxModel):
    """A Proxmox cluster (or standalone node's pseudo-cluster) behind an endpoint, linked to NetBox's."""

    endpoint = models.ForeignKey(
        "netbox_hvsync.HvEndpoint", on_delete=models.CASCADE, related_name="clusters"
    )
    name = models.CharField(max_length=100)
    cluster = models.ForeignKey(
        "virtualization.Cluster",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="hvsync_clusters",
    )
    last_complete_read = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a full sync last read this endpoint completely (the last_seen of what it holds)",
    )

    class Meta:
        ordering = ("endpoint", "name")
        constraints = [
            models.UniqueConstraint(fields=("endpoint", "name"), name="hvsync_cluster_unique_name")
        ]
        verbose_name = "Proxmox cluster"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:hvcluster", args=[self.pk])


class HvNode(NetBoxModel):
    cluster = models.ForeignKey(HvCluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=100)
    node_id = models.PositiveIntegerField(default=0, help_text="Corosync node id (0 for a standalone node)")
    online = models.BooleanField(default=False)
    device = models.ForeignKey(
        "dcim.Device", on_delete=models.SET_NULL, null=True, blank=True, related_name="hvsync_nodes"
    )

    class Meta:
        ordering = ("cluster", "name")
        constraints = [models.UniqueConstraint(fields=("cluster", "name"), name="hvsync_node_unique_name")]
        verbose_name = "Proxmox node"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:hvnode", args=[self.pk])

    @property
    def endpoint(self):
        return self.cluster.endpoint


class HvStorage(NetBoxModel):
    cluster = models.ForeignKey(HvCluster, on_delete=models.CASCADE, related_name="storages")
    name = models.CharField(max_length=100, help_text="Proxmox storage id")
    storage_type = models.CharField(
        max_length=50, blank=True, help_text="dir, lvmthin, zfspool, nfs, pbs, ..."
    )
    content = ArrayField(models.CharField(max_length=30), default=list, blank=True)
    shared = models.BooleanField(default=False)
    active = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    total = models.PositiveBigIntegerField(null=True, blank=True, help_text="bytes")
    used = models.PositiveBigIntegerField(null=True, blank=True, help_text="bytes")
    avail = models.PositiveBigIntegerField(null=True, blank=True, help_text="bytes")
    nodes = models.ManyToManyField(HvNode, blank=True, related_name="storages")
    gone_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a complete sync first no longer found it in Proxmox (null: present)",
    )

    class Meta:
        ordering = ("cluster", "name")
        constraints = [models.UniqueConstraint(fields=("cluster", "name"), name="hvsync_storage_unique_name")]
        verbose_name = "Proxmox storage"
        verbose_name_plural = "Proxmox storage"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:hvstorage", args=[self.pk])


class HvBackup(NetBoxModel):
    storage = models.ForeignKey(HvStorage, on_delete=models.CASCADE, related_name="backups")
    volid = models.CharField(max_length=255, help_text="e.g. local:backup/vzdump-qemu-100-....vma.zst")
    vmid = models.PositiveIntegerField()
    virtual_machine = models.ForeignKey(
        "virtualization.VirtualMachine",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="hvsync_backups",
    )
    ctime = models.DateTimeField(null=True, blank=True, verbose_name="Created (Proxmox)")
    size = models.PositiveBigIntegerField(null=True, blank=True, help_text="bytes")
    format = models.CharField(max_length=30, blank=True)
    notes = models.TextField(blank=True)
    protected = models.BooleanField(default=False)
    verification_state = models.CharField(
        max_length=20, choices=BackupVerificationChoices, default=BackupVerificationChoices.NONE
    )
    gone_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a complete sync first no longer found it in Proxmox (null: present)",
    )

    class Meta:
        ordering = ("-ctime", "pk")
        constraints = [
            models.UniqueConstraint(fields=("storage", "volid"), name="hvsync_backup_unique_volid")
        ]
        verbose_name = "Proxmox backup"

    def __str__(self) -> str:
        return self.volid

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:hvbackup", args=[self.pk])

    def get_verification_state_color(self) -> str:
        return BackupVerificationChoices.colors.get(self.verification_state)


class HvSnapshot(NetBoxModel):
    virtual_machine = models.ForeignKey(
        "virtualization.VirtualMachine", on_delete=models.CASCADE, related_name="hvsync_snapshots"
    )
    name = models.CharField(max_length=100)
    parent = models.CharField(max_length=100, blank=True)
    snaptime = models.DateTimeField(null=True, blank=True)
    vmstate = models.BooleanField(default=False, help_text="RAM state included")
    description = models.TextField(blank=True)
    gone_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a complete sync first no longer found it in Proxmox (null: present)",
    )

    class Meta:
        ordering = ("virtual_machine", "snaptime", "name")
        constraints = [
            models.UniqueConstraint(fields=("virtual_machine", "name"), name="hvsync_snapshot_unique_name")
        ]
        verbose_name = "Proxmox snapshot"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:hvsnapshot", args=[self.pk])


class HvTaskHistory(NetBoxModel):
    endpoint = models.ForeignKey("netbox_hvsync.HvEndpoint", on_delete=models.CASCADE, related_name="tasks")
    node = models.ForeignKey(HvNode, on_delete=models.SET_NULL, null=True, blank=True, related_name="tasks")
    upid = models.CharField(max_length=255, unique=True, verbose_name="UPID")
    task_type = models.CharField(max_length=50, help_text="e.g. qmstart, vzdump")
    vmid = models.PositiveIntegerField(null=True, blank=True)
    virtual_machine = models.ForeignKey(
        "virtualization.VirtualMachine",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="hvsync_tasks",
    )
    user = models.CharField(max_length=100, blank=True)
    status = models.CharField(
        max_length=255, blank=True, help_text="OK, or the error text; blank while running"
    )
    starttime = models.DateTimeField()
    endtime = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-starttime", "pk")
        verbose_name = "Proxmox task"
        verbose_name_plural = "Proxmox task history"

    def __str__(self) -> str:
        return self.upid

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:hvtaskhistory", args=[self.pk])


class BackupRoutine(NetBoxModel):
    """A scheduled backup job (vzdump) of the cluster, every field of SPEC 2.4."""

    #: SPEC 2.4's fields in its order (besides id/url/display and NetBox's tags, custom fields and
    #: timestamps), wire data the backend reads too; the serializer, detail page and table list these.
    spec_fields: ClassVar[tuple[str, ...]] = PLUGIN_RECORDS["backup-routine"].fields

    endpoint = models.ForeignKey(
        "netbox_hvsync.HvEndpoint", on_delete=models.CASCADE, related_name="backup_routines"
    )
    job_id = models.CharField(max_length=100, help_text="Proxmox backup job id")
    enabled = models.BooleanField(default=True)
    schedule = models.CharField(
        max_length=100, blank=True, help_text="Proxmox calendar event, e.g. 'sun 01:00'"
    )
    next_run = models.DateTimeField(null=True, blank=True)
    node = models.ForeignKey(HvNode, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    storage = models.ForeignKey(
        HvStorage, on_delete=models.SET_NULL, null=True, blank=True, related_name="backup_routines"
    )
    selection = ArrayField(
        models.PositiveIntegerField(), default=list, blank=True, help_text="VMIDs in the job"
    )
    comment = models.CharField(max_length=500, blank=True)
    status = models.CharField(max_length=20, choices=SyncedStatusChoices, default=SyncedStatusChoices.ACTIVE)
    gone_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a complete sync first no longer found it in Proxmox (null: present)",
    )
    keep_last = models.PositiveIntegerField(null=True, blank=True)
    keep_daily = models.PositiveIntegerField(null=True, blank=True)
    keep_weekly = models.PositiveIntegerField(null=True, blank=True)
    keep_monthly = models.PositiveIntegerField(null=True, blank=True)
    keep_yearly = models.PositiveIntegerField(null=True, blank=True)
    keep_all = models.BooleanField(null=True, blank=True)
    notes_template = models.CharField(max_length=1024, blank=True)
    bwlimit = models.PositiveIntegerField(null=True, blank=True, help_text="KiB/s")
    zstd = models.PositiveSmallIntegerField(null=True, blank=True, help_text="zstd threads")
    io_workers = models.PositiveSmallIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    fleecing = models.CharField(max_length=255, blank=True, help_text="Empty means disabled")
    fleecing_storage = models.ForeignKey(
        HvStorage, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    repeat_missed = models.BooleanField(default=False)
    pbs_change_detection_mode = models.CharField(
        max_length=20, choices=PbsChangeDetectionModeChoices, blank=True
    )
    raw_config = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("endpoint", "job_id")
        constraints = [
            models.UniqueConstraint(fields=("endpoint", "job_id"), name="hvsync_backuproutine_unique_job")
        ]
        verbose_name = "backup routine"

    def __str__(self) -> str:
        return self.job_id

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:backuproutine", args=[self.pk])

    def get_status_color(self) -> str:
        return SyncedStatusChoices.colors.get(self.status)

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        if self.node_id and self.endpoint_id and self.node.cluster.endpoint_id != self.endpoint_id:
            errors["node"] = "The node belongs to another endpoint."
        for field in ("storage", "fleecing_storage"):
            storage = getattr(self, field)
            if storage is not None and self.endpoint_id and storage.cluster.endpoint_id != self.endpoint_id:
                errors[field] = "The storage belongs to another endpoint."
        if not isinstance(self.raw_config, dict):
            errors["raw_config"] = "Must be a JSON object."
        if errors:
            raise ValidationError(errors)


class Replication(NetBoxModel):
    """A storage replication job of one VM between nodes (SPEC 2.4)."""

    #: SPEC 2.4's fields in its order (besides id/url/display and NetBox's tags, custom fields and
    #: timestamps), wire data the backend reads too; the serializer, detail page, table and form list these.
    spec_fields: ClassVar[tuple[str, ...]] = PLUGIN_RECORDS["replication"].fields

    endpoint = models.ForeignKey(
        "netbox_hvsync.HvEndpoint",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="replications",
    )
    replication_id = models.CharField(max_length=50, help_text="<vmid>-<n>")
    virtual_machine = models.ForeignKey(
        "virtualization.VirtualMachine", on_delete=models.CASCADE, related_name="hvsync_replications"
    )
    hv_node = models.ForeignKey(HvNode, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    guest = models.PositiveIntegerField(help_text="VMID")
    target = models.CharField(max_length=100, help_text="Target node name")
    job_type = models.CharField(
        max_length=20, choices=ReplicationJobTypeChoices, default=ReplicationJobTypeChoices.LOCAL
    )
    schedule = models.CharField(max_length=100, blank=True)
    rate = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0.0)], help_text="MiB/s")
    comment = models.CharField(max_length=500, blank=True)
    disable = models.BooleanField(default=False)
    source = models.CharField(max_length=100, blank=True, help_text="Source node name")
    jobnum = models.PositiveIntegerField(validators=[MaxValueValidator(10**6)])
    remove_job = models.CharField(max_length=20, choices=RemoveJobChoices, null=True, blank=True)
    status = models.CharField(max_length=20, choices=SyncedStatusChoices, default=SyncedStatusChoices.ACTIVE)
    gone_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a complete sync first no longer found it in Proxmox (null: present)",
    )
    raw_config = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("endpoint", "replication_id")
        constraints = [
            models.UniqueConstraint(
                fields=("endpoint", "replication_id"),
                name="hvsync_replication_unique_id",
                nulls_distinct=False,
            )
        ]
        verbose_name = "replication"

    def __str__(self) -> str:
        return self.replication_id

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:replication", args=[self.pk])

    def get_status_color(self) -> str:
        return SyncedStatusChoices.colors.get(self.status)

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        match = REPLICATION_ID_RE.match(self.replication_id or "")
        if match is None:
            errors["replication_id"] = "Must have the shape <vmid>-<n>, e.g. 100-0."
        elif (
            self.guest is not None
            and self.jobnum is not None
            and (int(match.group(1)) != self.guest or int(match.group(2)) != self.jobnum)
        ):
            errors["replication_id"] = f"Must be {self.guest}-{self.jobnum} (guest-jobnum)."
        if self.hv_node_id and self.endpoint_id and self.hv_node.cluster.endpoint_id != self.endpoint_id:
            errors["hv_node"] = "The node belongs to another endpoint."
        if not isinstance(self.raw_config, dict):
            errors["raw_config"] = "Must be a JSON object."
        if errors:
            raise ValidationError(errors)
