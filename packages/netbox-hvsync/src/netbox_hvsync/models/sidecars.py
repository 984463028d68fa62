"""Typed sync-state sidecars: the Proxmox identity of every NetBox object the backend writes.

The backend finds "its" object by (endpoint, Proxmox identity) here, never by name: renaming a VM in
Proxmox or in NetBox does not break the link, and two VMs with one name on two clusters stay apart.

The links to NetBox's own models have no reverse accessor (`related_name="+"`): a reverse relation
would add a field to VirtualMachine, Device, IPAddress, ... that NetBox's filtersets do not cover, and
NetBox's own test suite (`test_missing_filters`) fails with the plugin installed. Code that needs the
sidecar of a NetBox object asks the sidecar model (`SyncedVirtualMachine.objects.filter(virtual_machine=vm)`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Max, Q
from django.urls import reverse
from netbox.models import ChangeLoggedModel

from netbox_hvsync.choices import VmTypeChoices

__all__ = (
    "SyncedDevice",
    "SyncedIPAddress",
    "SyncedInterface",
    "SyncedPrefix",
    "SyncedVLAN",
    "SyncedVirtualDisk",
    "SyncedVirtualMachine",
)


class SyncedObject(ChangeLoggedModel):
    endpoint = models.ForeignKey("netbox_hvsync.HvEndpoint", on_delete=models.CASCADE, related_name="+")
    last_seen = models.DateTimeField(null=True, blank=True, help_text="When the last sync saw it in Proxmox")
    last_run_id = models.CharField(
        max_length=64, blank=True, help_text="run_id of the last sync that wrote it"
    )
    gone_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a complete sync first no longer found it in Proxmox (null: present)",
    )
    gone_request = models.BooleanField(
        default=False, help_text="The run that marked it gone asked for its deletion (delete_stale)"
    )
    gone_prior_status = models.CharField(
        max_length=50,
        blank=True,
        help_text="The object's status before the endpoint's gone policy set one (restored when it returns)",
    )

    #: the core NetBox object's field on each concrete sidecar (`virtual_machine`, `device`, ...)
    link_fields: tuple[str, ...] = ()

    class Meta:
        abstract = True

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any, *args: Any, **kwargs: Any) -> Any:
        """Remember the stored mark, so a save can tell a gone transition without reading the row again."""
        instance = super().from_db(db, field_names, values, *args, **kwargs)
        instance._loaded_gone_since = instance.__dict__.get("gone_since")
        return instance

    def get_absolute_url(self) -> str:
        return reverse(f"plugins:netbox_hvsync:{self._meta.model_name}", args=[self.pk])

    @property
    def target(self) -> Any:
        """The NetBox object this sidecar names (None for a row of neither kind)."""
        for name in self.link_fields:
            if getattr(self, f"{name}_id", None) is not None:
                return getattr(self, name)
        return None

    def seen_last(self, reads: dict[int, Any]) -> datetime | None:
        """The last run that read this object in Proxmox while it is present: its endpoint's last complete
        read if later than the stored `last_seen`. `reads` caches the endpoint's read across a list."""
        from netbox_hvsync.models.proxmox import HvCluster

        if self.endpoint_id not in reads:
            clusters = HvCluster.objects.filter(endpoint_id=self.endpoint_id)
            reads[self.endpoint_id] = clusters.aggregate(read=Max("last_complete_read"))["read"]
        read = reads[self.endpoint_id]
        if read is None or (self.last_seen is not None and self.last_seen >= read):
            return self.last_seen
        return read


class SyncedVirtualMachine(SyncedObject):
    link_fields = ("virtual_machine",)
    virtual_machine = models.OneToOneField(
        "virtualization.VirtualMachine", on_delete=models.CASCADE, related_name="+"
    )
    cluster = models.ForeignKey(
        "netbox_hvsync.HvCluster", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    node_name = models.CharField(max_length=100, blank=True)
    vmid = models.PositiveIntegerField()
    vm_type = models.CharField(max_length=10, choices=VmTypeChoices, default=VmTypeChoices.QEMU)
    is_template = models.BooleanField(default=False)

    class Meta:
        ordering = ("endpoint", "vmid")
        constraints = [
            models.UniqueConstraint(fields=("endpoint", "vmid"), name="hvsync_syncedvm_unique_vmid")
        ]
        verbose_name = "synced virtual machine"

    def __str__(self) -> str:
        return f"{self.vm_type}/{self.vmid}"


class SyncedDevice(SyncedObject):
    link_fields = ("device",)
    device = models.OneToOneField("dcim.Device", on_delete=models.CASCADE, related_name="+")
    node = models.ForeignKey(
        "netbox_hvsync.HvNode", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    node_name = models.CharField(max_length=100)

    class Meta:
        ordering = ("endpoint", "node_name")
        constraints = [
            models.UniqueConstraint(fields=("endpoint", "node_name"), name="hvsync_synceddevice_unique_node")
        ]
        verbose_name = "synced device"

    def __str__(self) -> str:
        return f"node/{self.node_name}"


class SyncedInterface(SyncedObject):
    """A VM NIC (`net0`, keyed by vmid) or a node interface (`vmbr0`, keyed by node name)."""

    link_fields = ("vm_interface", "interface")
    vm_interface = models.OneToOneField(
        "virtualization.VMInterface",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    interface = models.OneToOneField(
        "dcim.Interface", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    vmid = models.PositiveIntegerField(null=True, blank=True)
    node_name = models.CharField(max_length=100, blank=True)
    key = models.CharField(max_length=100, help_text="net0 for a VM NIC, the interface name on a node")

    class Meta:
        ordering = ("endpoint", "vmid", "node_name", "key")
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(vm_interface__isnull=False, interface__isnull=True, vmid__isnull=False)
                    | Q(vm_interface__isnull=True, interface__isnull=False, vmid__isnull=True)
                ),
                name="hvsync_syncedinterface_one_target",
            ),
            models.UniqueConstraint(
                fields=("endpoint", "vmid", "key"),
                condition=Q(vmid__isnull=False),
                name="hvsync_syncedinterface_unique_vm_key",
            ),
            models.UniqueConstraint(
                fields=("endpoint", "node_name", "key"),
                condition=Q(vmid__isnull=True),
                name="hvsync_syncedinterface_unique_node_key",
            ),
        ]
        verbose_name = "synced interface"

    def __str__(self) -> str:
        owner = f"vm/{self.vmid}" if self.vmid is not None else f"node/{self.node_name}"
        return f"{owner}/{self.key}"

    def clean(self) -> None:
        super().clean()
        if bool(self.vm_interface_id) == bool(self.interface_id):
            raise ValidationError(
                {"vm_interface": "Link exactly one of a VM interface or a device interface."}
            )
        if self.vm_interface_id and self.vmid is None:
            raise ValidationError({"vmid": "A VM interface needs the VMID."})
        if self.interface_id and self.vmid is not None:
            raise ValidationError({"vmid": "A device interface has no VMID; give node_name instead."})
        if self.interface_id and not self.node_name:
            raise ValidationError({"node_name": "A device interface needs its node name."})


class SyncedVirtualDisk(SyncedObject):
    link_fields = ("virtual_disk",)
    virtual_disk = models.OneToOneField(
        "virtualization.VirtualDisk", on_delete=models.CASCADE, related_name="+"
    )
    vmid = models.PositiveIntegerField()
    key = models.CharField(max_length=50, help_text="scsi0, virtio1, rootfs, mp0, ...")

    class Meta:
        ordering = ("endpoint", "vmid", "key")
        constraints = [
            models.UniqueConstraint(fields=("endpoint", "vmid", "key"), name="hvsync_synceddisk_unique_key")
        ]
        verbose_name = "synced virtual disk"

    def __str__(self) -> str:
        return f"vm/{self.vmid}/{self.key}"


class SyncedIPAddress(SyncedObject):
    link_fields = ("ip_address",)
    ip_address = models.OneToOneField("ipam.IPAddress", on_delete=models.CASCADE, related_name="+")
    vmid = models.PositiveIntegerField(null=True, blank=True)
    node_name = models.CharField(max_length=100, blank=True)
    interface_key = models.CharField(max_length=100, blank=True)
    address = models.CharField(max_length=64, help_text="Address with prefix length as Proxmox reports it")

    class Meta:
        ordering = ("endpoint", "address")
        constraints = [
            models.UniqueConstraint(
                fields=("endpoint", "vmid", "node_name", "interface_key", "address"),
                name="hvsync_syncedip_unique_address",
                nulls_distinct=False,
            )
        ]
        verbose_name = "synced IP address"
        verbose_name_plural = "synced IP addresses"

    def __str__(self) -> str:
        return self.address


class SyncedVLAN(SyncedObject):
    link_fields = ("vlan",)
    vlan = models.OneToOneField("ipam.VLAN", on_delete=models.CASCADE, related_name="+")
    zone = models.CharField(max_length=100, blank=True)
    vnet = models.CharField(max_length=100)

    class Meta:
        ordering = ("endpoint", "vnet")
        constraints = [
            models.UniqueConstraint(fields=("endpoint", "vnet"), name="hvsync_syncedvlan_unique_vnet")
        ]
        verbose_name = "synced VLAN"

    def __str__(self) -> str:
        return f"vnet/{self.vnet}"


class SyncedPrefix(SyncedObject):
    link_fields = ("prefix",)
    prefix = models.OneToOneField("ipam.Prefix", on_delete=models.CASCADE, related_name="+")
    vnet = models.CharField(max_length=100)
    subnet = models.CharField(max_length=100, help_text="Proxmox SDN subnet id")

    class Meta:
        ordering = ("endpoint", "vnet", "subnet")
        constraints = [
            models.UniqueConstraint(
                fields=("endpoint", "vnet", "subnet"), name="hvsync_syncedprefix_unique_subnet"
            )
        ]
        verbose_name = "synced prefix"
        verbose_name_plural = "synced prefixes"

    def __str__(self) -> str:
        return f"vnet/{self.vnet}/{self.subnet}"
