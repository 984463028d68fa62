"""What every plugin serializer shares: NetBox's feature fields, write-only secrets, and related
objects looked up so a value the database cannot hold is a 400, never a 500."""

from __future__ import annotations

from typing import Any

from django.db import DataError, transaction
from netbox.api.serializers import NetBoxModelSerializer, ValidatedModelSerializer, WritableNestedSerializer
from rest_framework import serializers

from netbox_hvsync.wire import PLUGIN_RECORDS

NETBOX_FEATURE_FIELDS = ("tags", "custom_fields", "created", "last_updated")


def record_fields(name: str) -> tuple[str, ...]:
    """A plugin record's serializer fields: NetBox's identity fields, the record's own fields as the wire
    data lists them (the backend reads the same list), then NetBox's feature fields."""
    return ("id", "url", "display_url", "display", *PLUGIN_RECORDS[name].fields, *NETBOX_FEATURE_FIELDS)


def secret_field(label: str) -> serializers.CharField:
    """A write-only secret: never rendered; blank or null on update keeps the stored value (SPEC 5.2.9)."""
    return serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=1024,
        style={"input_type": "password"},
        help_text=f"{label}; write-only, never returned",
    )


class StorableRelatedLookups:
    """A related object given by attributes (`{"address": ...}`) is looked up in the database with whatever
    the client sent; a value the column cannot hold (`{"address": [null, null]}`, found by the REST fuzz
    run) raised a database error: a 500, and an aborted transaction. Each lookup runs in a savepoint and
    such a value is a 400 naming the field."""

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()  # type: ignore[misc]
        for field in fields.values():
            if field.read_only:
                continue
            # one related object, or each of a list of them (tags: `{"name": "\x00"}` was a 500 too)
            target = getattr(field, "child", field)
            if getattr(target, "nested", False) or isinstance(target, WritableNestedSerializer):
                target.to_internal_value = _storable_lookup(target.to_internal_value)
        return fields


def _storable_lookup(lookup: Any) -> Any:
    def to_internal_value(data: Any) -> Any:
        try:
            with transaction.atomic():
                return lookup(data)
        except (DataError, ValueError, TypeError, OverflowError):
            raise serializers.ValidationError(
                "Related object not found: give its numeric id or attributes with values of their type."
            ) from None

    return to_internal_value


class HvsyncModelSerializer(StorableRelatedLookups, NetBoxModelSerializer):
    """Base of the plugin's model serializers."""


class HvsyncSidecarSerializer(StorableRelatedLookups, ValidatedModelSerializer):
    """Base of the sync-state sidecar serializers (no tags or custom fields).

    `last_seen` is answered as the last run that read the object in Proxmox without a write per run: while
    the object is present, its endpoint's last complete read (`HvCluster.last_complete_read`, stamped
    once per full run) when that is later than the stored time of the last sidecar write; once gone, the
    stored time, frozen when the mark was set (docs/sync.md, "Seen, and gone")."""

    def to_representation(self, instance: Any) -> Any:
        data = super().to_representation(instance)
        if "last_seen" in data and getattr(instance, "gone_since", None) is None:
            reads = self.context.setdefault("hvsync_complete_reads", {})
            seen = instance.seen_last(reads)
            if seen is not None:
                data["last_seen"] = self.fields["last_seen"].to_representation(seen)
        return data


class SecretFieldsMixin:
    """Drops blank/null secrets before model validation so they count as omitted."""

    secret_fields: tuple[str, ...] = ()

    def validate(self, data: Any) -> Any:
        if getattr(self, "nested", False):  # a nested reference resolves to an existing object
            return super().validate(data)  # type: ignore[misc]
        for name in self.secret_fields:
            if name in data and not data[name]:
                data.pop(name)
        return super().validate(data)  # type: ignore[misc]


__all__ = [
    "NETBOX_FEATURE_FIELDS",
    "HvsyncModelSerializer",
    "HvsyncSidecarSerializer",
    "SecretFieldsMixin",
    "StorableRelatedLookups",
    "record_fields",
    "secret_field",
]
