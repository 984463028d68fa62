"""Which NetBox route stands behind a path the apply path writes and the rows route reads.

Both routes work on NetBox's own REST routes (`dcim/devices`, `virtualization/interfaces`, ...) without
re-declaring them: the path resolves to NetBox's viewset, which names the model, the serializer that
validates and renders it, and the filterset its list accepts. Both are off together when the plugin's
`change_sets` setting is False.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.db.models import Model
from django.urls import resolve
from netbox.plugins.utils import get_plugin_config
from utilities.api import get_serializer_for_model


def enabled() -> bool:
    """`PLUGINS_CONFIG["netbox_hvsync"]["change_sets"]` (default True): False turns the apply path and
    the rows route off."""
    return bool(get_plugin_config("netbox_hvsync", "change_sets", True))


@dataclass(frozen=True)
class Target:
    """The model, REST serializer and filters behind a path (NetBox's own route for it)."""

    model: type[Model]
    serializer: type[Any]
    filterset: type[Any] | None


@cache
def target(path: str) -> Target:
    view = resolve(f"/{settings.BASE_PATH}api/{path}/").func
    viewset = view.cls  # type: ignore[attr-defined]
    model = viewset.queryset.model
    # Some routes pick their serializer per request (4.5's VMs): the model's own is the one they write with.
    serializer = viewset.serializer_class or get_serializer_for_model(model)
    return Target(model, serializer, getattr(viewset, "filterset_class", None))
