from django.db import migrations, models

# Before 0005 the backend used HTTPS only on these ports and plain HTTP on every other (issue 39).
TLS_PORTS = (443, 8443)


def scheme_from_port(apps, schema_editor):
    """Existing rows keep what they did: https on 443/8443, http elsewhere; new rows default to https."""
    InventoryEndpoint = apps.get_model("netbox_hvsync", "InventoryEndpoint")
    InventoryEndpoint.objects.exclude(port__in=TLS_PORTS).update(scheme="http")
    InventoryEndpoint.objects.filter(port__in=TLS_PORTS).update(scheme="https")


class Migration(migrations.Migration):
    """The inventory endpoint's explicit scheme (C1), and the durable list of deleted Proxmox endpoints
    whose backend rows are still to be retired (C3)."""

    dependencies = [
        ("netbox_hvsync", "0004_backendendpoint_key_proof"),
    ]

    operations = [
        migrations.CreateModel(
            name="PendingRetirement",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False)),
                ("hv_endpoint_pk", models.PositiveIntegerField(unique=True)),
                ("backend_id", models.PositiveIntegerField(blank=True, null=True)),
                ("name", models.CharField(max_length=200)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("last_error", models.CharField(blank=True, max_length=500)),
            ],
            options={
                "verbose_name": "pending retirement",
                "ordering": ("created",),
            },
        ),
        migrations.AddField(
            model_name="inventoryendpoint",
            name="scheme",
            field=models.CharField(default="https", max_length=5),
        ),
        migrations.RunPython(scheme_from_port, migrations.RunPython.noop),
    ]
