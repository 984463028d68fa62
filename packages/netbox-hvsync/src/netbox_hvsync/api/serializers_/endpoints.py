"""Serializers of the connection records: the backend, the NetBox inventory as the backend sees it,
and the Proxmox endpoints (secrets write-only)."""

from __future__ import annotations

from typing import Any

from dcim.api.serializers import SiteSerializer
from django.core.exceptions import ValidationError as DjangoValidationError
from ipam.api.serializers import IPAddressSerializer
from netbox.api.fields import ChoiceField
from rest_framework import serializers
from tenancy.api.serializers import TenantSerializer

from netbox_hvsync import models
from netbox_hvsync.backend.adoption import KeyAdoptionRefused
from netbox_hvsync.choices import (
    AccessMethodChoices,
    GonePolicyChoices,
    KeyStateChoices,
    SchemeChoices,
    TokenVersionChoices,
)
from netbox_hvsync.rules.urls import TargetError, backend_url_target

from .base import NETBOX_FEATURE_FIELDS, HvsyncModelSerializer, SecretFieldsMixin, secret_field


class BackendEndpointSerializer(SecretFieldsMixin, HvsyncModelSerializer):
    secret_fields = ("token",)
    ip_address = IPAddressSerializer(nested=True, required=False, allow_null=True)
    # Adoption owns the key state (SPEC 5.2): only a verified key makes a row adopted, never a client.
    key_state = ChoiceField(choices=KeyStateChoices, read_only=True)
    # The model's `url` column (the backend's base URL) would clash with NetBox's `url` (the API link).
    backend_url = serializers.CharField(
        source="url", required=False, allow_blank=True, max_length=500, help_text="Backend base URL"
    )
    token = secret_field("Backend API key")
    has_token = serializers.BooleanField(read_only=True)
    is_pending = serializers.BooleanField(read_only=True)

    class Meta:
        model = models.BackendEndpoint
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "name",
            "enabled",
            "backend_url",
            "ip_address",
            "port",
            "verify_ssl",
            "token",
            "has_token",
            "key_state",
            "key_fingerprint",
            "is_pending",
            "comments",
            *NETBOX_FEATURE_FIELDS,
        )
        read_only_fields = ("key_fingerprint",)
        brief_fields = ("id", "url", "display", "name")

    def validate(self, data: Any) -> Any:
        """URL rejections name `backend_url`, the field the client sent (SPEC 5.2.5, 7.2)."""
        url = data.get("url")
        if url:
            port = data.get("port", self.instance.port if self.instance else None)
            try:
                backend_url_target(url, port)
            except TargetError as exc:
                raise serializers.ValidationError(
                    {"backend_url" if exc.field == "url" else exc.field: [exc.message]}
                ) from None
        try:
            return super().validate(data)
        except DjangoValidationError as exc:  # the model's clean() names its column, `url`
            errors = serializers.as_serializer_error(exc)
            if "url" in errors:
                errors["backend_url"] = errors.pop("url")
            raise serializers.ValidationError(errors) from None

    def save(self, **kwargs: Any) -> Any:
        """Key adoption refusals (raised by the save itself, SPEC 5.2.1) as field-keyed validation errors."""
        try:
            return super().save(**kwargs)
        except KeyAdoptionRefused as exc:
            raise serializers.ValidationError({exc.field: [exc.message]}) from None


class InventoryEndpointSerializer(SecretFieldsMixin, HvsyncModelSerializer):
    secret_fields = ("token",)
    ip_address = IPAddressSerializer(nested=True, required=False, allow_null=True)
    scheme = ChoiceField(choices=SchemeChoices, required=False)
    token_version = ChoiceField(choices=TokenVersionChoices, required=False)
    token = secret_field("NetBox API token")
    has_token = serializers.BooleanField(read_only=True)

    class Meta:
        model = models.InventoryEndpoint
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "name",
            "scheme",
            "ip_address",
            "domain",
            "port",
            "token_version",
            "token_key",
            "token",
            "has_token",
            "verify_ssl",
            "enabled",
            "pushed_credential_fingerprint",
            "comments",
            *NETBOX_FEATURE_FIELDS,
        )
        read_only_fields = ("pushed_credential_fingerprint",)
        brief_fields = ("id", "url", "display", "name")


class HvEndpointSerializer(SecretFieldsMixin, HvsyncModelSerializer):
    secret_fields = ("token_value", "password")
    ip_address = IPAddressSerializer(nested=True, required=False, allow_null=True)
    site = SiteSerializer(nested=True, required=False, allow_null=True)
    tenant = TenantSerializer(nested=True, required=False, allow_null=True)
    access_methods = serializers.ListField(
        child=serializers.ChoiceField(choices=AccessMethodChoices.values()), required=False
    )
    token_value = secret_field("Proxmox API token secret")
    password = secret_field("Proxmox password")
    has_token_value = serializers.BooleanField(read_only=True)
    has_password = serializers.BooleanField(read_only=True)
    gone_policy = ChoiceField(choices=GonePolicyChoices, required=False)

    class Meta:
        model = models.HvEndpoint
        fields = (
            "id",
            "url",
            "display_url",
            "display",
            "name",
            "ip_address",
            "domain",
            "port",
            "username",
            "access_methods",
            "token_name",
            "token_value",
            "has_token_value",
            "password",
            "has_password",
            "verify_ssl",
            "enabled",
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
            "comments",
            *NETBOX_FEATURE_FIELDS,
        )
        read_only_fields = ("template_build_grant_confirmed", "backend_id")
        brief_fields = ("id", "url", "display", "name")


__all__ = ["BackendEndpointSerializer", "HvEndpointSerializer", "InventoryEndpointSerializer"]
