"""Serializers of the synced Proxmox records: clusters, nodes, storage, backups, snapshots, tasks,
backup routines and replications."""

from __future__ import annotations

from typing import Any

from dcim.api.serializers import DeviceSerializer
from netbox.api.fields import ChoiceField
from rest_framework import serializers
from virtualization.api.serializers import ClusterSerializer, VirtualMachineSerializer

from netbox_hvsync import models
from netbox_hvsync.choices import (
    BackupVerificationChoices,
    PbsChangeDetectionModeChoices,
    RemoveJobChoices,
    ReplicationJobTypeChoices,
    SyncedStatusChoices,
)

from .base import NETBOX_FEATURE_FIELDS, HvsyncModelSerializer, record_fields
from .endpoints import HvEndpointSerializer


class HvClusterSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    cluster = ClusterSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.HvCluster
        fields = (*record_fields("cluster"), "last_complete_read")
        brief_fields = ("id", "url", "display", "name")


class HvNodeSerializer(HvsyncModelSerializer):
    cluster = HvClusterSerializer(nested=True)
    device = DeviceSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.HvNode
        fields = record_fields("node")
        brief_fields = ("id", "url", "display", "name", "node_id", "online")


class HvStorageSerializer(HvsyncModelSerializer):
    cluster = HvClusterSerializer(nested=True)
    content = serializers.ListField(child=serializers.CharField(max_length=30), required=False)
    nodes = HvNodeSerializer(nested=True, many=True, required=False)

    class Meta:
        model = models.HvStorage
        fields = (*record_fields("storage"), "gone_since")
        brief_fields = ("id", "url", "display", "cluster", "name")

    def to_representation(self, instance: models.HvStorage) -> dict[str, Any]:
        data = super().to_representation(instance)
        if self.nested and "cluster" in data and instance.cluster_id:
            # SPEC 2.4: a nested storage carries its cluster as {id, name}
            data["cluster"] = {"id": instance.cluster_id, "name": instance.cluster.name}
        return data

    def create(self, validated_data: dict[str, Any]) -> models.HvStorage:
        nodes = validated_data.pop("nodes", None)
        instance = super().create(validated_data)
        if nodes is not None:
            instance.nodes.set(nodes)
        return instance

    def update(self, instance: models.HvStorage, validated_data: dict[str, Any]) -> models.HvStorage:
        nodes = validated_data.pop("nodes", None)
        instance = super().update(instance, validated_data)
        if nodes is not None:
            instance.nodes.set(nodes)
        return instance


class HvBackupSerializer(HvsyncModelSerializer):
    storage = HvStorageSerializer(nested=True)
    virtual_machine = VirtualMachineSerializer(nested=True, required=False, allow_null=True)
    verification_state = ChoiceField(choices=BackupVerificationChoices, required=False)

    class Meta:
        model = models.HvBackup
        fields = (*record_fields("backup"), "gone_since")
        brief_fields = ("id", "url", "display", "volid", "vmid")


class HvSnapshotSerializer(HvsyncModelSerializer):
    virtual_machine = VirtualMachineSerializer(nested=True)

    class Meta:
        model = models.HvSnapshot
        fields = (*record_fields("snapshot"), "gone_since")
        brief_fields = ("id", "url", "display", "name")


class HvTaskHistorySerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    node = HvNodeSerializer(nested=True, required=False, allow_null=True)
    virtual_machine = VirtualMachineSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.HvTaskHistory
        fields = record_fields("task-history")
        brief_fields = ("id", "url", "display", "upid")


class BackupRoutineSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    node = HvNodeSerializer(nested=True, required=False, allow_null=True)
    storage = HvStorageSerializer(nested=True, required=False, allow_null=True)
    fleecing_storage = HvStorageSerializer(nested=True, required=False, allow_null=True)
    selection = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False)
    status = ChoiceField(choices=SyncedStatusChoices, required=False)
    pbs_change_detection_mode = serializers.ChoiceField(
        choices=PbsChangeDetectionModeChoices.values(), required=False, allow_blank=True
    )
    raw_config = serializers.DictField(required=False)

    class Meta:
        model = models.BackupRoutine
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            *models.BackupRoutine.spec_fields,
            "gone_since",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "job_id")


class ReplicationSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True, required=False, allow_null=True)
    virtual_machine = VirtualMachineSerializer(nested=True)
    hv_node = HvNodeSerializer(nested=True, required=False, allow_null=True)
    job_type = ChoiceField(choices=ReplicationJobTypeChoices, required=False)
    remove_job = ChoiceField(choices=RemoveJobChoices, required=False, allow_null=True, allow_blank=True)
    status = ChoiceField(choices=SyncedStatusChoices, required=False)
    raw_config = serializers.DictField(required=False)

    class Meta:
        model = models.Replication
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            *models.Replication.spec_fields,
            "gone_since",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "replication_id")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("remove_job") == "":
            data["remove_job"] = None
        return super().validate(data)


__all__ = [
    "BackupRoutineSerializer",
    "HvBackupSerializer",
    "HvClusterSerializer",
    "HvNodeSerializer",
    "HvSnapshotSerializer",
    "HvStorageSerializer",
    "HvTaskHistorySerializer",
    "ReplicationSerializer",
]
