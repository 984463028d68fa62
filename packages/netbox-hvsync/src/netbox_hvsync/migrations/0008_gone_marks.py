import django.core.validators
from django.db import migrations, models

GONE_HELP = "When a complete sync first no longer found it in Proxmox (null: present)"
REQUEST_HELP = "The run that marked it gone asked for its deletion (delete_stale)"
PRIOR_HELP = "The object's status before the endpoint's gone policy set one (restored when it returns)"


class Migration(migrations.Migration):
    """Gone from Proxmox (issue 40): `gone_since` on every sync-state record and on the plugin records the
    sync marks, the endpoint's gone settings (policy, status, guard share, auto-approve) and the plugin
    cluster's `last_complete_read` (the `last_seen` of what a complete read still finds)."""

    dependencies = [
        ("netbox_hvsync", "0007_deletionrequest_lifecycle"),
    ]

    operations = [
        migrations.AddField(
            model_name="hvendpoint",
            name="gone_policy",
            field=models.CharField(
                choices=[
                    ("keep", "Keep (mark only)"),
                    ("status", "Set a status"),
                    ("request-deletion", "Request deletion"),
                ],
                default="keep",
                help_text="What an object gone from Proxmox does to NetBox's own fields, applied once when it goes",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="hvendpoint",
            name="gone_status",
            field=models.CharField(
                blank=True,
                help_text="The status the 'status' policy sets (a virtual machine status, e.g. offline); restored "
                "when the object returns",
                max_length=50,
            ),
        ),
        migrations.AddField(
            model_name="hvendpoint",
            name="gone_guard_share",
            field=models.FloatField(
                default=0.3,
                help_text="A run that would mark more than this share (0-1) of this endpoint's objects gone at once "
                "(and at least 10) marks none and fails: the mass-vanish guard",
                validators=[
                    django.core.validators.MinValueValidator(0.0),
                    django.core.validators.MaxValueValidator(1.0),
                ],
                verbose_name="Gone guard share",
            ),
        ),
        migrations.AddField(
            model_name="hvendpoint",
            name="auto_approve_deletions",
            field=models.BooleanField(
                default=False,
                help_text="Unattended mode: deletion requests of this endpoint's gone objects are applied at once",
            ),
        ),
        migrations.AddField(
            model_name="hvcluster",
            name="last_complete_read",
            field=models.DateTimeField(
                blank=True,
                help_text="When a full sync last read this endpoint completely (the last_seen of what it holds)",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="hvstorage",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="hvbackup",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="hvsnapshot",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="backuproutine",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="replication",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="syncedvirtualmachine",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="synceddevice",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="syncedinterface",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="syncedvirtualdisk",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="syncedipaddress",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="syncedvlan",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="syncedprefix",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text=GONE_HELP, null=True),
        ),
        migrations.AddField(
            model_name="syncedvirtualmachine",
            name="gone_request",
            field=models.BooleanField(default=False, help_text=REQUEST_HELP),
        ),
        migrations.AddField(
            model_name="syncedvirtualmachine",
            name="gone_prior_status",
            field=models.CharField(blank=True, help_text=PRIOR_HELP, max_length=50),
        ),
        migrations.AddField(
            model_name="synceddevice",
            name="gone_request",
            field=models.BooleanField(default=False, help_text=REQUEST_HELP),
        ),
        migrations.AddField(
            model_name="synceddevice",
            name="gone_prior_status",
            field=models.CharField(blank=True, help_text=PRIOR_HELP, max_length=50),
        ),
        migrations.AddField(
            model_name="syncedinterface",
            name="gone_request",
            field=models.BooleanField(default=False, help_text=REQUEST_HELP),
        ),
        migrations.AddField(
            model_name="syncedinterface",
            name="gone_prior_status",
            field=models.CharField(blank=True, help_text=PRIOR_HELP, max_length=50),
        ),
        migrations.AddField(
            model_name="syncedvirtualdisk",
            name="gone_request",
            field=models.BooleanField(default=False, help_text=REQUEST_HELP),
        ),
        migrations.AddField(
            model_name="syncedvirtualdisk",
            name="gone_prior_status",
            field=models.CharField(blank=True, help_text=PRIOR_HELP, max_length=50),
        ),
        migrations.AddField(
            model_name="syncedipaddress",
            name="gone_request",
            field=models.BooleanField(default=False, help_text=REQUEST_HELP),
        ),
        migrations.AddField(
            model_name="syncedipaddress",
            name="gone_prior_status",
            field=models.CharField(blank=True, help_text=PRIOR_HELP, max_length=50),
        ),
        migrations.AddField(
            model_name="syncedvlan",
            name="gone_request",
            field=models.BooleanField(default=False, help_text=REQUEST_HELP),
        ),
        migrations.AddField(
            model_name="syncedvlan",
            name="gone_prior_status",
            field=models.CharField(blank=True, help_text=PRIOR_HELP, max_length=50),
        ),
        migrations.AddField(
            model_name="syncedprefix",
            name="gone_request",
            field=models.BooleanField(default=False, help_text=REQUEST_HELP),
        ),
        migrations.AddField(
            model_name="syncedprefix",
            name="gone_prior_status",
            field=models.CharField(blank=True, help_text=PRIOR_HELP, max_length=50),
        ),
    ]
