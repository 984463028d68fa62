import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def executed_is_applied(apps, schema_editor):
    """The old terminal status `executed` is `applied` in the lifecycle of issue 40."""
    apps.get_model("netbox_hvsync", "DeletionRequest").objects.filter(status="executed").update(status="applied")


def applied_is_executed(apps, schema_editor):
    apps.get_model("netbox_hvsync", "DeletionRequest").objects.filter(status="applied").update(status="executed")


class Migration(migrations.Migration):
    """Deletion requests get their whole lifecycle (issue 40): the identity, run and `gone_since` of what
    they ask to delete, who decided and their comment, what applying deleted or why it failed, the
    permission `approve_deletionrequest` (four eyes) and at most one open request per object."""

    dependencies = [
        ("core", "0020_owner"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("netbox_hvsync", "0006_sidecars_no_reverse_accessor"),
    ]

    operations = [
        migrations.RenameField(model_name="deletionrequest", old_name="approved_by", new_name="decided_by"),
        migrations.RenameField(model_name="deletionrequest", old_name="executed_at", new_name="applied_at"),
        migrations.AlterField(
            model_name="deletionrequest",
            name="object_repr",
            field=models.CharField(help_text="The object's display name when requested", max_length=200),
        ),
        migrations.AddField(
            model_name="deletionrequest",
            name="identity",
            field=models.CharField(
                blank=True,
                help_text="The object's hvsync identity (its sync-state record) when requested; applying checks it",
                max_length=200,
            ),
        ),
        migrations.AddField(
            model_name="deletionrequest",
            name="run_id",
            field=models.CharField(blank=True, help_text="run_id of the sync that raised it", max_length=64),
        ),
        migrations.AddField(
            model_name="deletionrequest",
            name="job",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="core.job",
            ),
        ),
        migrations.AddField(
            model_name="deletionrequest",
            name="gone_since",
            field=models.DateTimeField(blank=True, help_text="Since when Proxmox no longer has it", null=True),
        ),
        migrations.AddField(
            model_name="deletionrequest",
            name="comment",
            field=models.TextField(blank=True, help_text="The decider's comment"),
        ),
        migrations.AddField(
            model_name="deletionrequest",
            name="deleted_data",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="What applying deleted: the object's serialised data and what cascaded with it",
            ),
        ),
        migrations.AddField(
            model_name="deletionrequest",
            name="error",
            field=models.TextField(blank=True, help_text="Why applying failed"),
        ),
        migrations.RunPython(executed_is_applied, applied_is_executed),
        migrations.AlterModelOptions(
            name="deletionrequest",
            options={
                "ordering": ("-created", "pk"),
                "permissions": [("approve_deletionrequest", "Can approve or reject deletion requests")],
                "verbose_name": "deletion request",
            },
        ),
        migrations.AddConstraint(
            model_name="deletionrequest",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ("pending", "approved"))),
                fields=("object_type", "object_id"),
                name="hvsync_deletionrequest_one_open_per_object",
                violation_error_message="This object already has an open (pending or approved) deletion request.",
            ),
        ),
    ]
