"""Serializers of the read-only audit records: deletion requests and apply jobs."""

from __future__ import annotations

from core.api.serializers import JobSerializer
from netbox.api.fields import ChoiceField, ContentTypeField
from users.api.serializers import UserSerializer

from netbox_hvsync import models
from netbox_hvsync.choices import ApplyJobStatusChoices, DeletionRequestStatusChoices

from .base import NETBOX_FEATURE_FIELDS, HvsyncModelSerializer
from .endpoints import HvEndpointSerializer


class DeletionRequestSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True, read_only=True)
    object_type = ContentTypeField(read_only=True)
    status = ChoiceField(choices=DeletionRequestStatusChoices, read_only=True)
    requested_by = UserSerializer(nested=True, read_only=True)
    decided_by = UserSerializer(nested=True, read_only=True)
    job = JobSerializer(nested=True, read_only=True)

    class Meta:
        model = models.DeletionRequest
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "endpoint",
            "object_type",
            "object_id",
            "object_repr",
            "identity",
            "run_id",
            "job",
            "reason",
            "gone_since",
            "status",
            "requested_by",
            "decided_by",
            "decided_at",
            "comment",
            "applied_at",
            "deleted_data",
            "error",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "status")


class ApplyJobSerializer(HvsyncModelSerializer):
    endpoint = HvEndpointSerializer(nested=True, read_only=True)
    status = ChoiceField(choices=ApplyJobStatusChoices, read_only=True)

    class Meta:
        model = models.ApplyJob
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "endpoint",
            "status",
            "plan",
            "result",
            "started",
            "finished",
            "error",
            *NETBOX_FEATURE_FIELDS,
        )
        brief_fields = ("id", "url", "display", "status")


__all__ = ["ApplyJobSerializer", "DeletionRequestSerializer"]
