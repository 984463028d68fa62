"""What a request to queue a sync may ask for, validated once for the REST API and the UI.

`SyncScheduleSerializer` is the body of REST `sync/schedule/` and the check behind the UI schedule form
(`views.schedule`), so both accept exactly the same requests and name the same fields in their errors.
Neither side imports the other: both import this module.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import serializers

from netbox_hvsync import models
from netbox_hvsync.choices import SYNC_STAGES, SYNC_TYPE_ALL, SyncModeChoices
from netbox_hvsync.sync.branching import branching_installed
from netbox_hvsync.sync.selected import SELECTED_TYPES, VM_TYPE, model_of


class _IdList(serializers.ListField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=serializers.IntegerField(min_value=1), required=False, allow_empty=True, **kwargs
        )


class SyncScheduleSerializer(serializers.Serializer):
    """The body of POST sync/schedule/; every error names its field."""

    sync_types = serializers.ListField(
        child=serializers.ChoiceField(choices=[SYNC_TYPE_ALL, *SYNC_STAGES]),
        required=False,
        allow_empty=False,
        help_text="Stage slugs, or ['all'] (the default)",
    )
    hv_endpoint_ids = _IdList(help_text="Plugin ids of the Proxmox endpoints; empty or absent = all")
    cluster_ids = _IdList(
        help_text="Plugin ids of Proxmox clusters: the sync covers their endpoints (a cluster is read whole)"
    )
    node_ids = _IdList(help_text="Refused when non-empty: an endpoint is read whole, never one node of it")
    vm_ids = _IdList(help_text="NetBox virtual machine ids (selected-objects mode)")
    object_ids = _IdList(
        help_text="Ids of the selected objects of `batch_object_type` (selected-objects mode); "
        "VMs may use `vm_ids` instead"
    )
    mode = serializers.ChoiceField(choices=SyncModeChoices.values(), default=SyncModeChoices.STAGED)
    batch_object_type = serializers.ChoiceField(
        choices=list(SELECTED_TYPES),
        required=False,
        allow_null=True,
        help_text="Model label of the selected objects (default virtualization.virtualmachine)",
    )
    backend_endpoint_id = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    schedule_at = serializers.DateTimeField(required=False, allow_null=True)
    interval = serializers.IntegerField(min_value=1, required=False, allow_null=True, help_text="minutes")
    use_branch = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Run the stages in a netbox-branching working branch, merged at the end (staged mode)",
    )

    def _check_ids(self, model: type, ids: list[int]) -> list[int]:
        found = set(model.objects.filter(pk__in=ids).values_list("pk", flat=True))
        if missing := sorted(set(ids) - found):
            raise serializers.ValidationError(f"Unknown id(s): {', '.join(map(str, missing))}")
        return ids

    def validate_hv_endpoint_ids(self, value: list[int]) -> list[int]:
        return self._check_ids(models.HvEndpoint, value)

    def validate_cluster_ids(self, value: list[int]) -> list[int]:
        return self._check_ids(models.HvCluster, value)

    def validate_node_ids(self, value: list[int]) -> list[int]:
        self._check_ids(models.HvNode, value)
        if value:  # accepted and recorded before, while the run synced everything
            raise serializers.ValidationError(
                "A sync cannot be narrowed to nodes: each Proxmox endpoint is read whole. "
                "Select its endpoint (hv_endpoint_ids) or cluster (cluster_ids) instead."
            )
        return value

    def _cluster_scope(self, attrs: dict[str, Any]) -> None:
        """cluster_ids narrow the run to the endpoints those clusters belong to, within hv_endpoint_ids."""
        clusters = attrs.get("cluster_ids") or []
        if not clusters:
            return
        owners = dict(models.HvCluster.objects.filter(pk__in=clusters).values_list("pk", "endpoint_id"))
        chosen = set(attrs.get("hv_endpoint_ids") or [])
        if chosen and (outside := sorted(pk for pk, endpoint in owners.items() if endpoint not in chosen)):
            raise serializers.ValidationError(
                {"cluster_ids": f"Cluster(s) {', '.join(map(str, outside))} are outside hv_endpoint_ids."}
            )
        attrs["hv_endpoint_ids"] = sorted(set(owners.values()))

    def validate_vm_ids(self, value: list[int]) -> list[int]:
        from virtualization.models import VirtualMachine

        return self._check_ids(VirtualMachine, value)

    def validate_backend_endpoint_id(self, value: int | None) -> int | None:
        if value is not None:
            self._check_ids(models.BackendEndpoint, [value])
        return value

    def validate_schedule_at(self, value: Any) -> Any:
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return value

    def validate_sync_types(self, value: list[str]) -> list[str]:
        if SYNC_TYPE_ALL in value and len(value) > 1:
            raise serializers.ValidationError("'all' cannot be combined with other stages.")
        return list(dict.fromkeys(value))

    def _selected_objects(self, attrs: dict[str, Any]) -> None:
        """Selected-objects mode: VMs in `vm_ids` (or `object_ids`), other types in `object_ids`."""
        label = attrs.get("batch_object_type") or VM_TYPE
        attrs["batch_object_type"] = label
        object_ids = list(dict.fromkeys(attrs.get("object_ids") or []))
        if label == VM_TYPE:
            if object_ids and attrs.get("vm_ids"):
                raise serializers.ValidationError(
                    {"object_ids": "Give the VM ids in vm_ids or object_ids, not both."}
                )
            vm_ids = attrs.get("vm_ids") or object_ids
            if not vm_ids:
                raise serializers.ValidationError(
                    {"vm_ids": "A selected-objects sync needs at least one VM id."}
                )
            attrs["vm_ids"] = self._known(label, "object_ids", vm_ids) if object_ids else vm_ids
            attrs["object_ids"] = []
            return
        if attrs.get("vm_ids"):
            raise serializers.ValidationError(
                {"vm_ids": f"vm_ids selects virtual machines; give the {label} ids in object_ids."}
            )
        if not object_ids:
            raise serializers.ValidationError(
                {"object_ids": f"A selected-objects sync of {label} needs at least one id."}
            )
        attrs["object_ids"] = self._known(label, "object_ids", object_ids)

    def _known(self, label: str, field: str, ids: list[int]) -> list[int]:
        found = set(model_of(label).objects.filter(pk__in=ids).values_list("pk", flat=True))
        if missing := sorted(set(ids) - found):
            raise serializers.ValidationError(
                {field: f"Unknown {label} id(s): {', '.join(map(str, missing))}"}
            )
        return ids

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self._cluster_scope(attrs)
        if attrs.get("mode") == SyncModeChoices.SELECTED:
            self._selected_objects(attrs)
        elif attrs.get("object_ids"):
            raise serializers.ValidationError(
                {"object_ids": "object_ids is only used in selected-objects mode."}
            )
        if attrs.get("use_branch"):
            if attrs.get("mode") == SyncModeChoices.SELECTED:
                raise serializers.ValidationError(
                    {
                        "use_branch": "A branched sync runs the staged pipeline; selected-objects mode is not branched."
                    }
                )
            if not branching_installed():
                raise serializers.ValidationError({"use_branch": "netbox-branching is not installed."})
        return attrs


__all__ = ["SyncScheduleSerializer"]
