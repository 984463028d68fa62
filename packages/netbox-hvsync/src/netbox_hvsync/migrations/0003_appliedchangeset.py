import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    """The ledger of change sets applied through the apply path (docs/apply-path.md)."""

    dependencies = [
        ("netbox_hvsync", "0002_hvendpoint_sync_modes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AppliedChangeSet",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        help_text="The client's change-set id (the changelog request id)",
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("created", models.DateTimeField(auto_now_add=True, db_index=True)),
                ("outcome", models.JSONField(help_text="The answer the change set received: per-operation ids")),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "applied change set",
                "ordering": ("-created",),
            },
        ),
    ]
