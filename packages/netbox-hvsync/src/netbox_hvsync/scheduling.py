"""What a request to queue a sync may ask for, validated once for the REST API and the UI.

`SyncScheduleSerializer` is the body of REST `sync/schedule/` and the check behind the UI schedule form
(`views.schedule`), the repair and the full-update button (`views.sync_state`), so all accept exactly the
same requests and name the same fields in their errors. Neither side imports the other: both import this
module.

Who may sync what (docs/plugin.md "Who may sync"): queueing needs `SCHEDULE_PERMISSIONS`; every id in the
body is looked up among the objects the user may view (NetBox's `restrict(user, "view")`), so an id the
user cannot see is "unknown" exactly like an id that does not exist; an explicitly chosen Proxmox or
backend endpoint that is disabled is refused; and "every endpoint" (no ids) means every enabled endpoint
the user may view: recorded as "all" for a user whose view permission has no constraints, else as the
list of those endpoints.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from rest_framework import serializers

from netbox_hvsync import models
from netbox_hvsync.choices import SYNC_STAGES, SYNC_TYPE_ALL, SyncModeChoices
from netbox_hvsync.sync.branching import branching_installed
from netbox_hvsync.sync.selected import SELECTED_TYPES, VM_TYPE, model_of

#: Queueing a sync runs it against Proxmox endpoints: the job permission and view permission on them.
SCHEDULE_PERMISSIONS = ("core.add_job", "netbox_hvsync.view_hvendpoint")
#: The most ids one list of the body may hold (a sync of more objects is several requests).
MAX_IDS = 1000


def missing_permissions(user: Any, permissions: tuple[str, ...] = SCHEDULE_PERMISSIONS) -> list[str]:
    """The permissions of `permissions` the user lacks (model level; the ids are checked per object)."""
    return [p for p in permissions if not user.has_perm(p)]


def visible(model: type, user: Any) -> QuerySet:
    """The rows of `model` the user may view (superusers: all)."""
    return model.objects.restrict(user, "view")


def unconstrained(queryset: QuerySet) -> bool:
    """True when `restrict()` left the queryset whole (a superuser, or a view permission without
    constraints): only then does "no endpoint chosen" stay "all", including endpoints added later."""
    return not queryset.query.where


class _IdList(serializers.ListField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
            required=False,
            allow_empty=True,
            max_length=MAX_IDS,
            **kwargs,
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

    @property
    def user(self) -> Any:
        user = self.context.get("user")
        if user is None:
            raise RuntimeError("SyncScheduleSerializer needs context={'user': <the requesting user>}")
        return user

    def _visible(self, model: type) -> QuerySet:
        return visible(model, self.user)

    def _check_ids(self, model: type, ids: list[int]) -> list[int]:
        """Every id must be one the user may view; one they cannot is as unknown as one that never was."""
        found = set(self._visible(model).filter(pk__in=ids).values_list("pk", flat=True))
        if missing := sorted(set(ids) - found):
            raise serializers.ValidationError(f"Unknown id(s): {', '.join(map(str, missing))}")
        return ids

    def validate_hv_endpoint_ids(self, value: list[int]) -> list[int]:
        self._check_ids(models.HvEndpoint, value)
        disabled = models.HvEndpoint.objects.filter(pk__in=value, enabled=False).values_list("pk", flat=True)
        if disabled := sorted(disabled):
            raise serializers.ValidationError(
                f"Proxmox endpoint(s) {', '.join(map(str, disabled))} are disabled: enable them, or leave "
                "them out (a disabled endpoint is never synced)."
            )
        return list(dict.fromkeys(value))

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
        usable = set(
            self._visible(models.HvEndpoint)
            .filter(pk__in=set(owners.values()), enabled=True)
            .values_list("pk", flat=True)
        )
        if unusable := sorted(pk for pk, endpoint in owners.items() if endpoint not in usable):
            raise serializers.ValidationError(
                {
                    "cluster_ids": f"Cluster(s) {', '.join(map(str, unusable))} belong to a Proxmox endpoint "
                    "that is disabled or that you may not view."
                }
            )
        attrs["hv_endpoint_ids"] = sorted(set(owners.values()))

    def _endpoint_scope(self, attrs: dict[str, Any]) -> None:
        """No endpoint chosen = every enabled endpoint the user may view: "all" when their view is
        unconstrained, else those endpoints by id (none: a 400, nothing to sync)."""
        if attrs.get("hv_endpoint_ids"):
            return
        endpoints = self._visible(models.HvEndpoint)
        if unconstrained(endpoints):
            return
        ids = sorted(endpoints.filter(enabled=True).values_list("pk", flat=True))
        if not ids:
            raise serializers.ValidationError(
                {"hv_endpoint_ids": "There is no enabled Proxmox endpoint you may view: nothing to sync."}
            )
        attrs["hv_endpoint_ids"] = ids

    def validate_vm_ids(self, value: list[int]) -> list[int]:
        from virtualization.models import VirtualMachine

        return self._check_ids(VirtualMachine, value)

    def validate_backend_endpoint_id(self, value: int | None) -> int | None:
        """Pinning a backend needs view permission on it (else it is unknown), and it must be enabled."""
        if value is not None:
            self._check_ids(models.BackendEndpoint, [value])
            if not models.BackendEndpoint.objects.filter(pk=value, enabled=True).exists():
                raise serializers.ValidationError(
                    f"Backend endpoint {value} is disabled: enable it, or leave the choice to the plugin."
                )
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
        found = set(self._visible(model_of(label)).filter(pk__in=ids).values_list("pk", flat=True))
        if missing := sorted(set(ids) - found):
            raise serializers.ValidationError(
                {field: f"Unknown {label} id(s): {', '.join(map(str, missing))}"}
            )
        return ids

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self._cluster_scope(attrs)
        self._endpoint_scope(attrs)
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


__all__ = [
    "MAX_IDS",
    "SCHEDULE_PERMISSIONS",
    "SyncScheduleSerializer",
    "missing_permissions",
    "unconstrained",
    "visible",
]
