from django.db import migrations, models


class Migration(migrations.Migration):
    """Per-endpoint sync modes (SPEC 4.3): existing endpoints keep syncing VMs and templates."""

    dependencies = [
        ("netbox_hvsync", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="hvendpoint",
            name="sync_mode_vm",
            field=models.BooleanField(
                default=True,
                help_text="Sync this endpoint's virtual machines (with their disks, interfaces, IPs and snapshots)",
                verbose_name="Sync virtual machines",
            ),
        ),
        migrations.AddField(
            model_name="hvendpoint",
            name="sync_mode_vm_template",
            field=models.BooleanField(
                default=True,
                help_text="Sync this endpoint's VM templates as virtual machines",
                verbose_name="Sync templates",
            ),
        ),
    ]
