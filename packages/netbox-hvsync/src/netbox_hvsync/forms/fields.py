"""Form fields the plugin's forms share: write-only secrets (blank keeps the stored value) and
optional related objects."""

from __future__ import annotations

from typing import Any

from django import forms
from utilities.forms.fields import DynamicModelChoiceField

KEEP_STORED = "Leave blank to keep the stored value."


def secret_field(label: str) -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=KEEP_STORED,
    )


def optional_field(model: type, label: str | None = None, **kwargs: Any) -> DynamicModelChoiceField:
    return DynamicModelChoiceField(queryset=model.objects.all(), required=False, label=label, **kwargs)


__all__ = ["KEEP_STORED", "optional_field", "secret_field"]
