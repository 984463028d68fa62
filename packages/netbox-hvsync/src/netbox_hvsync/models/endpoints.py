"""Connection records: the hvsync backend, NetBox as the backend sees it, and Proxmox endpoints."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, URLValidator
from django.db import models
from django.urls import reverse
from netbox.models import NetBoxModel
from utilities.exceptions import AbortRequest
from utilities.querysets import RestrictedQuerySet
from virtualization.choices import VirtualMachineStatusChoices

from netbox_hvsync.choices import (
    AccessMethodChoices,
    GonePolicyChoices,
    KeyStateChoices,
    SchemeChoices,
    TokenVersionChoices,
)
from netbox_hvsync.rules.gone import gone_setting_errors
from netbox_hvsync.rules.grants import (
    bulk_toggle_refusal,
    deletion_refusal,
    endpoint_label,
    touched_toggles,
)
from netbox_hvsync.rules.urls import TargetError, backend_url_target, check_endpoint_host

from .base import EncryptedCredentialsMixin, encrypted_property, presence_property

__all__ = (
    "BackendEndpoint",
    "HvEndpoint",
    "HvEndpointDeletionBlocked",
    "HvEndpointQuerySet",
    "InventoryEndpoint",
    "PendingRetirement",
)

PORT_VALIDATORS = [MinValueValidator(1), MaxValueValidator(65535)]


def host_errors(instance: Any, fields: Collection[str] = ("domain", "ip_address")) -> dict[str, str]:
    """Field errors for a domain or linked IP address the backend must never dial (issue 39: link-local,
    unspecified, IPv4-mapped, metadata, numeric names; `rules.urls.check_endpoint_host`)."""
    errors: dict[str, str] = {}
    for name in fields:
        if name == "ip_address":
            ip = instance.ip_address if instance.ip_address_id else None
            value = str(ip.address.ip) if ip is not None and ip.address is not None else None
        else:
            value = getattr(instance, name, None)
        try:
            check_endpoint_host(value, name)
        except TargetError as exc:
            errors[exc.field] = exc.message
    return errors


class BackendEndpoint(EncryptedCredentialsMixin, NetBoxModel):
    """Where the hvsync backend listens, and the API key the plugin uses there (SPEC 2.6)."""

    encrypted_fields = ("token_ciphertext",)

    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    url = models.CharField(
        max_length=500,
        blank=True,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="Base URL of the backend, e.g. https://hvsync.example.net:8800 (or give an IP address)",
    )
    ip_address = models.ForeignKey(
        "ipam.IPAddress", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    port = models.PositiveIntegerField(default=8800, validators=PORT_VALIDATORS)
    verify_ssl = models.BooleanField(default=True, verbose_name="Verify TLS")
    token_ciphertext = models.TextField(blank=True, editable=False)
    key_state = models.CharField(max_length=20, choices=KeyStateChoices, default=KeyStateChoices.PENDING)
    key_fingerprint = models.CharField(
        max_length=128, blank=True, help_text="Fingerprint of the adopted key; blank while pending"
    )
    key_proof = models.CharField(
        max_length=80,
        blank=True,
        editable=False,
        help_text="Validation proof: HMAC binding the adopted key to this URL, scheme, port and TLS setting",
    )
    comments = models.TextField(blank=True)

    class Meta:
        ordering = ("name",)
        verbose_name = "backend endpoint"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:backendendpoint", args=[self.pk])

    token = encrypted_property(
        "token_ciphertext",
        "The backend API key in plaintext (compatibility property over the encrypted column).",
    )
    has_token = presence_property("token_ciphertext")

    @property
    def is_pending(self) -> bool:
        return not self.key_fingerprint

    def clean(self) -> None:
        super().clean()
        if not self.url and not self.ip_address_id:
            raise ValidationError({"url": "Give the backend URL or an IP address."})
        if self.url:
            try:
                backend_url_target(self.url, self.port)
            except TargetError as exc:  # SPEC 5.2.5: refused before any request, naming the field
                raise ValidationError({exc.field: exc.message}) from None
        if errors := host_errors(self, ("ip_address",)):
            raise ValidationError(errors)

    def get_key_state_color(self) -> str:
        return KeyStateChoices.colors.get(self.key_state)


class InventoryEndpoint(EncryptedCredentialsMixin, NetBoxModel):
    """NetBox as the backend dials it: address, port and the API token the backend writes with."""

    encrypted_fields = ("token_ciphertext",)

    name = models.CharField(max_length=100, unique=True)
    ip_address = models.ForeignKey(
        "ipam.IPAddress", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    domain = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(default=443, validators=PORT_VALIDATORS)
    scheme = models.CharField(
        max_length=5,
        choices=SchemeChoices,
        default=SchemeChoices.HTTPS,
        help_text="How the backend dials NetBox; http sends the API token in clear",
    )
    token_version = models.PositiveSmallIntegerField(
        choices=TokenVersionChoices, default=TokenVersionChoices.V2
    )
    token_key = models.CharField(
        max_length=64, blank=True, help_text="Key (public identifier) of a v2 NetBox API token"
    )
    token_ciphertext = models.TextField(blank=True, editable=False)
    verify_ssl = models.BooleanField(default=True, verbose_name="Verify TLS")
    enabled = models.BooleanField(default=True)
    pushed_credential_fingerprint = models.CharField(
        max_length=128,
        blank=True,
        editable=False,
        help_text="HMAC-SHA256 of the last credentials pushed to the backend; blank = never pushed",
    )
    comments = models.TextField(blank=True)

    class Meta:
        ordering = ("name",)
        verbose_name = "inventory endpoint"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:inventoryendpoint", args=[self.pk])

    def other_enabled(self) -> InventoryEndpoint | None:
        """The other enabled inventory endpoint, if any (at most one may be enabled)."""
        return InventoryEndpoint.objects.filter(enabled=True).exclude(pk=self.pk).order_by("pk").first()

    token = encrypted_property("token_ciphertext", "NetBox's API token secret in plaintext.")
    has_token = presence_property("token_ciphertext")

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        if not self.domain and not self.ip_address_id:
            errors["domain"] = "Give a domain name or an IP address."
        errors.update(host_errors(self))
        if self.enabled and (other := self.other_enabled()) is not None:
            errors["enabled"] = (
                f"Inventory endpoint {other.name!r} is already enabled: the backend holds one NetBox "
                "inventory, and two enabled endpoints would overwrite it in turn. Disable that one first, "
                "or save this one disabled."
            )
        if self.token_version == TokenVersionChoices.V2 and not self.token_key:
            errors["token_key"] = "A v2 token needs its key."
        if errors:
            raise ValidationError(errors)


class HvEndpointDeletionBlocked(AbortRequest):
    """Raised while the last confirmed template-build grant is still true (SPEC 2.6).

    AbortRequest makes NetBox answer it cleanly everywhere: a form/flash message in the UI, and a
    400 with this detail on the REST API.
    """


class HvEndpointQuerySet(RestrictedQuerySet):
    """Refuses bulk deletes and local-only toggles on endpoints whose template-build grant is confirmed;
    the refusal is `rules.grants`' (the one guard every path asks)."""

    def _blocked(self) -> HvEndpoint | None:
        return self.filter(template_build_grant_confirmed=True).order_by("pk").first()

    def delete(self) -> Any:
        if (blocked := self._blocked()) is not None:
            blocked.check_deletable()
        return super().delete()

    delete.alters_data = True  # type: ignore[attr-defined]

    def update(self, **kwargs: Any) -> int:
        if touched_toggles(kwargs) and (blocked := self._blocked()) is not None:
            blocked.check_bulk_toggle(kwargs)
        return super().update(**kwargs)

    update.alters_data = True  # type: ignore[attr-defined]


def default_access_methods() -> list[str]:
    return [AccessMethodChoices.TOKEN]


class HvEndpoint(EncryptedCredentialsMixin, NetBoxModel):
    """A Proxmox VE cluster or standalone node, and how the backend logs in to it."""

    encrypted_fields = ("token_value_ciphertext", "password_ciphertext")

    name = models.CharField(max_length=100, unique=True)
    ip_address = models.ForeignKey(
        "ipam.IPAddress", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    domain = models.CharField(max_length=255, blank=True)
    port = models.PositiveIntegerField(default=8006, validators=PORT_VALIDATORS)
    username = models.CharField(max_length=100, help_text="e.g. root@pam")
    access_methods = ArrayField(
        models.CharField(max_length=20, choices=AccessMethodChoices),
        default=default_access_methods,
        help_text="How the backend authenticates: token, password or both",
    )
    token_name = models.CharField(max_length=100, blank=True, help_text="API token id, e.g. hvsync")
    token_value_ciphertext = models.TextField(blank=True, editable=False)
    password_ciphertext = models.TextField(blank=True, editable=False)
    verify_ssl = models.BooleanField(default=True, verbose_name="Verify TLS")
    enabled = models.BooleanField(default=True)
    timeout = models.PositiveIntegerField(default=15, validators=[MinValueValidator(1)], help_text="seconds")
    max_retries = models.PositiveSmallIntegerField(default=2, validators=[MaxValueValidator(10)])
    retry_backoff = models.FloatField(default=0.5, validators=[MinValueValidator(0.0)], help_text="seconds")
    allow_template_builds = models.BooleanField(
        default=False, help_text="Narrow grant letting the backend build VM templates on this endpoint"
    )
    sync_mode_vm = models.BooleanField(
        default=True,
        verbose_name="Sync virtual machines",
        help_text="Sync this endpoint's virtual machines (with their disks, interfaces, IPs and snapshots)",
    )
    sync_mode_vm_template = models.BooleanField(
        default=True,
        verbose_name="Sync templates",
        help_text="Sync this endpoint's VM templates as virtual machines",
    )
    gone_policy = models.CharField(
        max_length=20,
        choices=GonePolicyChoices,
        default=GonePolicyChoices.KEEP,
        help_text="What an object gone from Proxmox does to NetBox's own fields, applied once when it goes",
    )
    gone_status = models.CharField(
        max_length=50,
        blank=True,
        help_text="The status the 'status' policy sets (a virtual machine status, e.g. offline); restored "
        "when the object returns",
    )
    gone_guard_share = models.FloatField(
        default=0.30,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        verbose_name="Gone guard share",
        help_text="A run that would mark more than this share (0-1) of this endpoint's objects gone at once "
        "(and at least 10) marks none and fails: the mass-vanish guard",
    )
    auto_approve_deletions = models.BooleanField(
        default=False,
        help_text="Unattended mode: deletion requests of this endpoint's gone objects are applied at once",
    )
    template_build_grant_confirmed = models.BooleanField(
        default=False,
        editable=False,
        help_text="The last template-build grant the backend confirmed after a successful push",
    )
    site = models.ForeignKey("dcim.Site", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    tenant = models.ForeignKey(
        "tenancy.Tenant", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    backend_id = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="The backend's id for this endpoint once known"
    )
    comments = models.TextField(blank=True)

    objects = HvEndpointQuerySet.as_manager()

    class Meta:
        ordering = ("name",)
        verbose_name = "Proxmox endpoint"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("plugins:netbox_hvsync:hvendpoint", args=[self.pk])

    token_value = encrypted_property("token_value_ciphertext", "The Proxmox API token secret in plaintext.")
    password = encrypted_property("password_ciphertext", "The Proxmox password in plaintext.")
    has_token_value = presence_property("token_value_ciphertext")
    has_password = presence_property("password_ciphertext")

    @property
    def backend_name(self) -> str:
        """The name the backend stores: display name plus the immutable identity suffix (SPEC 2.3)."""
        return f"{self.name} (inv:{self.pk})"

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        if not self.domain and not self.ip_address_id:
            errors["domain"] = "Give a domain name or an IP address."
        errors.update(host_errors(self))
        methods = list(self.access_methods or [])
        if not methods:
            errors["access_methods"] = "Choose at least one access method."
        elif len(set(methods)) != len(methods):
            errors["access_methods"] = "Each access method may appear once."
        if AccessMethodChoices.TOKEN in methods and not self.token_name:
            errors["token_name"] = "Token access needs the token name."
        errors.update(
            gone_setting_errors(
                self.gone_policy,
                self.gone_status,
                self.gone_guard_share,
                statuses=VirtualMachineStatusChoices.values(),
            )
        )
        if errors:
            raise ValidationError(errors)

    def check_deletable(self) -> None:
        """Raise while the confirmed grant blocks deletion (SPEC 2.6; the refusal is `rules.grants`')."""
        refusal = deletion_refusal(self.template_build_grant_confirmed, endpoint_label(self.name))
        if refusal is not None:
            raise HvEndpointDeletionBlocked(refusal)

    def check_bulk_toggle(self, fields: Collection[str]) -> None:
        """Raise when a local-only bulk change of `fields` would toggle a confirmed grant's endpoint."""
        refusal = bulk_toggle_refusal(self.template_build_grant_confirmed, endpoint_label(self.name), fields)
        if refusal is not None:
            raise HvEndpointDeletionBlocked(refusal)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        self.check_deletable()
        return super().delete(*args, **kwargs)


class PendingRetirement(models.Model):
    """A deleted Proxmox endpoint whose backend row is still to be retired (C3: disabled, credentials wiped).

    Written in the same transaction as the delete, so a backend that is down when the endpoint goes is
    retired at the next preflight or push; the row goes once the backend confirmed. A plain model: it
    has no changelog, views or API of its own (the endpoint's delete is the logged change).
    """

    hv_endpoint_pk = models.PositiveIntegerField(
        unique=True, help_text="The deleted endpoint's id (the backend row's identity suffix)"
    )
    backend_id = models.PositiveIntegerField(null=True, blank=True, help_text="The backend's id, when known")
    name = models.CharField(max_length=200, help_text="The name the backend stores")
    created = models.DateTimeField(auto_now_add=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ("created",)
        verbose_name = "pending retirement"

    def __str__(self) -> str:
        return self.name
