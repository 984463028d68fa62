from django.db import migrations, models


class Migration(migrations.Migration):
    """The validation proof of an adopted backend key (SPEC 5.2.6). Rows adopted before it have none, so
    the next sync job (or a save) verifies their key once against the stored target before it is used."""

    dependencies = [
        ("netbox_hvsync", "0003_appliedchangeset"),
    ]

    operations = [
        migrations.AddField(
            model_name="backendendpoint",
            name="key_proof",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text="Validation proof: HMAC binding the adopted key to this URL, scheme, port and TLS setting",
                max_length=80,
            ),
        ),
    ]
