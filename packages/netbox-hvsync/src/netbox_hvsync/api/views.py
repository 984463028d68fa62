"""REST viewsets under /api/plugins/hvsync/ (SPEC 4.4). NetBox's viewsets enforce object permissions."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from core.api.serializers import JobSerializer
from core.models import Job
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from netbox.api.viewsets import NetBoxModelViewSet, NetBoxReadOnlyModelViewSet
from rest_framework import serializers as drf_serializers
from rest_framework.decorators import action
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import APIRootView

from netbox_hvsync import deletions, filtersets, models
from netbox_hvsync.filtersets import SyncJobFilterSet
from netbox_hvsync.querysets import sync_jobs
from netbox_hvsync.rules.deletions import APPROVE_PERMISSION
from netbox_hvsync.rules.grants import touched_toggles
from netbox_hvsync.wire.numbers import decimal

from . import serializers


class HvsyncRootView(APIRootView):
    def get_view_name(self) -> str:
        return "hvsync"


class ReadOnlyFirst:
    """SPEC 7.2: a write to a read-only resource is 405 for every signed-in caller. DRF checks permissions
    before it looks for the method's handler, so a user lacking `add`/`change`/`delete` got 403 instead:
    here the method is refused before any permission is asked. An anonymous request still gets NetBox's
    own answer (403 while LOGIN_REQUIRED)."""

    def check_permissions(self, request: Request) -> None:
        signed_in = request.user is not None and request.user.is_authenticated
        if signed_in and request.method not in self.allowed_methods:  # type: ignore[attr-defined]
            raise MethodNotAllowed(request.method)
        super().check_permissions(request)  # type: ignore[misc]


class BackendEndpointViewSet(NetBoxModelViewSet):
    queryset = models.BackendEndpoint.objects.select_related("ip_address")
    serializer_class = serializers.BackendEndpointSerializer
    filterset_class = filtersets.BackendEndpointFilterSet


class InventoryEndpointViewSet(NetBoxModelViewSet):
    queryset = models.InventoryEndpoint.objects.select_related("ip_address")
    serializer_class = serializers.InventoryEndpointSerializer
    filterset_class = filtersets.InventoryEndpointFilterSet


class HvEndpointViewSet(NetBoxModelViewSet):
    queryset = models.HvEndpoint.objects.select_related("ip_address", "site", "tenant")
    serializer_class = serializers.HvEndpointSerializer
    filterset_class = filtersets.HvEndpointFilterSet

    def perform_bulk_update(self, objects: Any, update_data: dict[int, dict[str, Any]], partial: bool) -> Any:
        """A list PATCH/PUT is a local-only bulk change: refuse toggles on endpoints with a confirmed grant
        (the refusal is `rules.grants`', asked through the model)."""
        touched = {str(pk): attrs.keys() for pk, attrs in update_data.items() if touched_toggles(attrs)}
        granted = objects.filter(pk__in=list(touched), template_build_grant_confirmed=True)
        for endpoint in granted.order_by("pk"):
            endpoint.check_bulk_toggle(touched[str(endpoint.pk)])
        return super().perform_bulk_update(objects, update_data, partial)


class HvClusterViewSet(NetBoxModelViewSet):
    queryset = models.HvCluster.objects.select_related("endpoint", "cluster")
    serializer_class = serializers.HvClusterSerializer
    filterset_class = filtersets.HvClusterFilterSet


class HvNodeViewSet(NetBoxModelViewSet):
    queryset = models.HvNode.objects.select_related("cluster", "device")
    serializer_class = serializers.HvNodeSerializer
    filterset_class = filtersets.HvNodeFilterSet


class HvStorageViewSet(NetBoxModelViewSet):
    queryset = models.HvStorage.objects.select_related("cluster").prefetch_related("nodes")
    serializer_class = serializers.HvStorageSerializer
    filterset_class = filtersets.HvStorageFilterSet


class HvBackupViewSet(NetBoxModelViewSet):
    queryset = models.HvBackup.objects.select_related("storage__cluster", "virtual_machine")
    serializer_class = serializers.HvBackupSerializer
    filterset_class = filtersets.HvBackupFilterSet


class HvSnapshotViewSet(NetBoxModelViewSet):
    queryset = models.HvSnapshot.objects.select_related("virtual_machine")
    serializer_class = serializers.HvSnapshotSerializer
    filterset_class = filtersets.HvSnapshotFilterSet


class HvTaskHistoryViewSet(NetBoxModelViewSet):
    queryset = models.HvTaskHistory.objects.select_related("endpoint", "node", "virtual_machine")
    serializer_class = serializers.HvTaskHistorySerializer
    filterset_class = filtersets.HvTaskHistoryFilterSet


class BackupRoutineViewSet(NetBoxModelViewSet):
    queryset = models.BackupRoutine.objects.select_related(
        "endpoint", "node", "storage__cluster", "fleecing_storage__cluster"
    )
    serializer_class = serializers.BackupRoutineSerializer
    filterset_class = filtersets.BackupRoutineFilterSet


class ReplicationViewSet(NetBoxModelViewSet):
    queryset = models.Replication.objects.select_related("endpoint", "virtual_machine", "hv_node")
    serializer_class = serializers.ReplicationSerializer
    filterset_class = filtersets.ReplicationFilterSet


class CanDecide(BasePermission):
    """The decision actions ask their own permission (`approve_deletionrequest`, in `deletions`); here only
    a signed-in caller whose token, if any, may write."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        token = request.auth
        return getattr(token, "write_enabled", True) is not False


class DecisionSerializer(drf_serializers.Serializer):
    comment = drf_serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


class DeletionRequestViewSet(ReadOnlyFirst, NetBoxReadOnlyModelViewSet):
    """Read-only records (SPEC 2.5); decisions are the actions `approve/` and `reject/` (issue 40):
    403 without `approve_deletionrequest` or for the requester approving, 409 unless pending."""

    queryset = models.DeletionRequest.objects.select_related(
        "endpoint", "object_type", "requested_by", "decided_by", "job"
    )
    serializer_class = serializers.DeletionRequestSerializer
    filterset_class = filtersets.DeletionRequestFilterSet

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.method == "GET":
            deletions.expire_stale()  # lazily: a pending request past its age is shown as expired

    def _decide(self, request: Request, pk: Any, decide: Any) -> Response:
        # NetBox restricts a POST's queryset to `add`: the decision asks its own permission instead
        if not request.user.has_perm(APPROVE_PERMISSION):
            return Response({"detail": f"deciding a deletion request needs {APPROVE_PERMISSION}"}, status=403)
        if not isinstance(request.data, Mapping):
            return Response({"detail": 'the body must be a JSON object, e.g. {"comment": "..."}'}, status=400)
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        visible = models.DeletionRequest.objects.restrict(request.user, "view")
        if decimal(str(pk), low=1, high=2**63 - 1) is None:
            return Response({"detail": "No DeletionRequest matches the given query."}, status=404)
        row = get_object_or_404(visible, pk=int(str(pk)))
        try:
            row = decide(row, user=request.user, comment=body.validated_data["comment"])
        except deletions.DecisionRefused as refused:
            code = {"forbidden": 403, "conflict": 409}.get(refused.kind, 400)
            return Response({"detail": refused.message}, status=code)
        row = visible.select_related("endpoint", "object_type", "requested_by", "decided_by", "job").get(
            pk=row.pk
        )
        return Response(self.get_serializer(row).data)

    @extend_schema(request=DecisionSerializer, responses={200: serializers.DeletionRequestSerializer})
    @action(detail=True, methods=["post"], permission_classes=[CanDecide])
    def approve(self, request: Request, pk: Any = None) -> Response:
        """Approve (four eyes) and apply at once: the answer is the request, `applied`, `failed` or `withdrawn`."""
        return self._decide(request, pk, deletions.approve)

    @extend_schema(request=DecisionSerializer, responses={200: serializers.DeletionRequestSerializer})
    @action(detail=True, methods=["post"], permission_classes=[CanDecide])
    def reject(self, request: Request, pk: Any = None) -> Response:
        """Reject: the object stays."""
        return self._decide(request, pk, deletions.reject)


class ApplyJobViewSet(ReadOnlyFirst, NetBoxReadOnlyModelViewSet):
    """Read-only audit of plan-then-apply cycles; writes answer 405."""

    queryset = models.ApplyJob.objects.select_related("endpoint")
    serializer_class = serializers.ApplyJobSerializer
    filterset_class = filtersets.ApplyJobFilterSet


class SyncJobViewSet(ReadOnlyFirst, NetBoxReadOnlyModelViewSet):
    """Core Job rows of hvsync syncs, serialized exactly as NetBox's core job serializer does.

    `log_entries` can reach ~130 KB per row, so list responses omit it unless `include_log_entries=true`.
    Object permissions are the core ones: the caller sees the jobs `core.view_job` allows.
    """

    queryset = sync_jobs(Job.objects.select_related("user", "object_type"))
    serializer_class = JobSerializer
    filterset_class = SyncJobFilterSet

    @cached_property
    def field_kwargs(self) -> dict[str, Any]:
        kwargs = dict(super().field_kwargs)
        if self.action == "list" and not self._include_log_entries and "fields" not in kwargs:
            kwargs["omit"] = [*kwargs.get("omit", []), "log_entries"]
        return kwargs

    @property
    def _include_log_entries(self) -> bool:
        return self.request.query_params.get("include_log_entries", "").lower() in ("true", "1", "yes", "on")


#
# Sidecars
#


def _sidecar_viewset(model: type, serializer: type, filterset: type, related: tuple[str, ...]) -> type:
    return type(
        f"{model.__name__}ViewSet",
        (NetBoxModelViewSet,),
        {
            "queryset": model.objects.select_related("endpoint", *related),
            "serializer_class": serializer,
            "filterset_class": filterset,
            "__doc__": f"Sync-state sidecar {model._meta.verbose_name}: written by the backend.",
        },
    )


SyncedVirtualMachineViewSet = _sidecar_viewset(
    models.SyncedVirtualMachine,
    serializers.SyncedVirtualMachineSerializer,
    filtersets.SyncedVirtualMachineFilterSet,
    ("virtual_machine", "cluster"),
)
SyncedDeviceViewSet = _sidecar_viewset(
    models.SyncedDevice,
    serializers.SyncedDeviceSerializer,
    filtersets.SyncedDeviceFilterSet,
    ("device", "node"),
)
SyncedInterfaceViewSet = _sidecar_viewset(
    models.SyncedInterface,
    serializers.SyncedInterfaceSerializer,
    filtersets.SyncedInterfaceFilterSet,
    ("vm_interface", "interface"),
)
SyncedVirtualDiskViewSet = _sidecar_viewset(
    models.SyncedVirtualDisk,
    serializers.SyncedVirtualDiskSerializer,
    filtersets.SyncedVirtualDiskFilterSet,
    ("virtual_disk",),
)
SyncedIPAddressViewSet = _sidecar_viewset(
    models.SyncedIPAddress,
    serializers.SyncedIPAddressSerializer,
    filtersets.SyncedIPAddressFilterSet,
    ("ip_address",),
)
SyncedVLANViewSet = _sidecar_viewset(
    models.SyncedVLAN, serializers.SyncedVLANSerializer, filtersets.SyncedVLANFilterSet, ("vlan",)
)
SyncedPrefixViewSet = _sidecar_viewset(
    models.SyncedPrefix, serializers.SyncedPrefixSerializer, filtersets.SyncedPrefixFilterSet, ("prefix",)
)
