import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """The sync-state sidecars' links to NetBox's models lose their reverse accessor (`hvsync_state`):
    it added a field to NetBox's core models that NetBox's filtersets do not cover, so NetBox's own
    test suite failed with the plugin installed (issue 39). The columns and constraints are unchanged."""

    dependencies = [
        ("netbox_hvsync", "0005_inventoryendpoint_scheme"),
    ]

    operations = [
        migrations.AlterField(
            model_name="syncedvirtualmachine",
            name="virtual_machine",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="virtualization.virtualmachine",
            ),
        ),
        migrations.AlterField(
            model_name="synceddevice",
            name="device",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="dcim.device"
            ),
        ),
        migrations.AlterField(
            model_name="syncedinterface",
            name="vm_interface",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="virtualization.vminterface",
            ),
        ),
        migrations.AlterField(
            model_name="syncedinterface",
            name="interface",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="dcim.interface",
            ),
        ),
        migrations.AlterField(
            model_name="syncedvirtualdisk",
            name="virtual_disk",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="virtualization.virtualdisk",
            ),
        ),
        migrations.AlterField(
            model_name="syncedipaddress",
            name="ip_address",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="ipam.ipaddress"
            ),
        ),
        migrations.AlterField(
            model_name="syncedvlan",
            name="vlan",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="ipam.vlan"
            ),
        ),
        migrations.AlterField(
            model_name="syncedprefix",
            name="prefix",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="ipam.prefix"
            ),
        ),
    ]
