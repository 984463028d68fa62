"""Serializers of the sync-state sidecars the backend writes beside NetBox's own objects."""

from __future__ import annotations

from dcim.api.serializers import DeviceSerializer, InterfaceSerializer
from ipam.api.serializers import IPAddressSerializer, PrefixSerializer, VLANSerializer
from netbox.api.fields import ChoiceField
from virtualization.api.serializers import (
    VirtualDiskSerializer,
    VirtualMachineSerializer,
    VMInterfaceSerializer,
)

from netbox_hvsync import models
from netbox_hvsync.choices import VmTypeChoices

from .base import HvsyncSidecarSerializer
from .endpoints import HvEndpointSerializer
from .proxmox import HvClusterSerializer, HvNodeSerializer

SIDECAR_COMMON = (
    "id",
    "url",
    "display",
    "endpoint",
    "last_seen",
    "gone_since",
    "gone_request",
    "gone_prior_status",
    "last_run_id",
    "created",
    "last_updated",
)


class SyncedVirtualMachineSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    virtual_machine = VirtualMachineSerializer(nested=True)
    cluster = HvClusterSerializer(nested=True, required=False, allow_null=True)
    vm_type = ChoiceField(choices=VmTypeChoices, required=False)

    class Meta:
        model = models.SyncedVirtualMachine
        fields = (
            *SIDECAR_COMMON,
            "virtual_machine",
            "cluster",
            "node_name",
            "vmid",
            "vm_type",
            "is_template",
        )
        brief_fields = ("id", "url", "display", "vmid")


class SyncedDeviceSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    device = DeviceSerializer(nested=True)
    node = HvNodeSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.SyncedDevice
        fields = (*SIDECAR_COMMON, "device", "node", "node_name")
        brief_fields = ("id", "url", "display", "node_name")


class SyncedInterfaceSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    vm_interface = VMInterfaceSerializer(nested=True, required=False, allow_null=True)
    interface = InterfaceSerializer(nested=True, required=False, allow_null=True)

    class Meta:
        model = models.SyncedInterface
        fields = (*SIDECAR_COMMON, "vm_interface", "interface", "vmid", "node_name", "key")
        brief_fields = ("id", "url", "display", "key")


class SyncedVirtualDiskSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    virtual_disk = VirtualDiskSerializer(nested=True)

    class Meta:
        model = models.SyncedVirtualDisk
        fields = (*SIDECAR_COMMON, "virtual_disk", "vmid", "key")
        brief_fields = ("id", "url", "display", "key")


class SyncedIPAddressSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    ip_address = IPAddressSerializer(nested=True)

    class Meta:
        model = models.SyncedIPAddress
        fields = (*SIDECAR_COMMON, "ip_address", "vmid", "node_name", "interface_key", "address")
        brief_fields = ("id", "url", "display", "address")


class SyncedVLANSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    vlan = VLANSerializer(nested=True)

    class Meta:
        model = models.SyncedVLAN
        fields = (*SIDECAR_COMMON, "vlan", "zone", "vnet")
        brief_fields = ("id", "url", "display", "vnet")


class SyncedPrefixSerializer(HvsyncSidecarSerializer):
    endpoint = HvEndpointSerializer(nested=True)
    prefix = PrefixSerializer(nested=True)

    class Meta:
        model = models.SyncedPrefix
        fields = (*SIDECAR_COMMON, "prefix", "vnet", "subnet")
        brief_fields = ("id", "url", "display", "subnet")


__all__ = [
    "SIDECAR_COMMON",
    "SyncedDeviceSerializer",
    "SyncedIPAddressSerializer",
    "SyncedInterfaceSerializer",
    "SyncedPrefixSerializer",
    "SyncedVLANSerializer",
    "SyncedVirtualDiskSerializer",
    "SyncedVirtualMachineSerializer",
]
