"""`rows/<path>/`: the objects of a NetBox list route as flat rows, for the backend's comparison reads.

A sync compares what NetBox holds with what Proxmox says, and reads every managed object to do it (a
no-change resync of 1,000 VMs is nothing but reads). NetBox's REST lists spend most of that time on what
the comparison never looks at: a hyperlink, a display string and nested counts for every related object,
and prefetches some routes always make (a VM interface's L2VPN terminations, IPs and FHRP groups).

This route answers the same query the REST list would (the route's own filterset, the user's `view`
permission and constraints, `fields=`, `limit`/`offset`, the REST page shape), with every requested field
rendered by the route's own serializer field, except related objects: those are `{"id", ...}` with only
the related object's plain brief fields (a MAC's `mac_address`, a tag's `slug`), no URL or display.
It serves stored fields and related objects only: counts, links and computed fields (`display`, `url`,
`device_count`) need the REST route's annotations, so asking for one is refused (400, `fields`).
Every value it gives is the value REST gives (tests/netbox/test_rows.py compares them field by field).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db.models import ForeignKey, ManyToManyField, Model, OneToOneField, QuerySet
from django.http import QueryDict
from rest_framework import serializers, status
from rest_framework.fields import SkipField
from rest_framework.permissions import IsAuthenticated
from rest_framework.relations import PKOnlyObject
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from utilities.permissions import get_permission_for_model

from netbox_hvsync.api.routes import Target, enabled, target
from netbox_hvsync.wire import change_sets, numbers

#: Largest page, as NetBox's default MAX_PAGE_SIZE
MAX_LIMIT = 1000
#: Largest offset (PostgreSQL's OFFSET is a bigint; no inventory comes near this)
MAX_OFFSET = 2**31 - 1
#: Query parameters of the route itself, not filters
OWN_PARAMS = ("fields", "limit", "offset", "brief", "ordering")
#: Fields of a nested brief representation that only point somewhere else or describe the object
LINK_FIELDS = frozenset({"url", "display_url", "display"})

Render = Callable[[Model], Any]


class RowsView(APIView):
    """GET rows/<path>/?fields=...&<filters>: one page of flat rows (see the module docstring)."""

    permission_classes = [IsAuthenticated]

    def get_view_name(self) -> str:
        return "Rows"

    def get(self, request: Request, path: str) -> Response:
        path = path.strip("/")
        if not enabled() or path not in change_sets.WRITABLE_PATHS:
            return _refuse(status.HTTP_404_NOT_FOUND, "path", f"No rows are served for {path!r}.")
        spec = target(path)
        if not request.user.has_perm(get_permission_for_model(spec.model, "view")):
            return _refuse(
                status.HTTP_403_FORBIDDEN, "path", f"You may not view {spec.model._meta.verbose_name_plural}."
            )
        limit = _whole(request.query_params.get("limit"), default=MAX_LIMIT, low=1, high=MAX_LIMIT)
        if limit is None:
            return _refuse(
                status.HTTP_400_BAD_REQUEST, "limit", f"limit must be a whole number from 1 to {MAX_LIMIT}."
            )
        offset = _whole(request.query_params.get("offset"), default=0, low=0, high=MAX_OFFSET)
        if offset is None:
            return _refuse(
                status.HTTP_400_BAD_REQUEST,
                "offset",
                f"offset must be a whole number from 0 to {MAX_OFFSET}.",
            )
        wanted = [f.strip() for f in (request.query_params.get("fields") or "").split(",") if f.strip()]
        serializer = spec.serializer(context={"request": request}, fields=wanted or None)
        columns = [
            c for name, f in serializer.fields.items() if (c := _column(spec.model, name, f)) is not None
        ]
        unknown = sorted(set(wanted) - {c.name for c in columns})
        if unknown:
            return _refuse(
                status.HTTP_400_BAD_REQUEST,
                "fields",
                f"Not served as rows (only stored fields and related objects are): {', '.join(unknown)}.",
            )
        queryset = _filtered(spec, request)
        if isinstance(queryset, Response):
            return queryset
        queryset = _loading(queryset, columns)
        count = queryset.count()
        page = queryset.order_by("pk")[offset : offset + limit]
        results = [{c.name: c.render(obj) for c in columns} for obj in page]
        return Response({"count": count, "next": None, "previous": None, "results": results})


def _filtered(spec: Target, request: Request) -> QuerySet[Any] | Response:
    """The user's viewable objects, filtered by the REST route's own filterset."""
    queryset = spec.model.objects.restrict(request.user, "view")  # type: ignore[attr-defined]
    if spec.filterset is None:
        return queryset
    params = QueryDict(mutable=True)
    for key, values in request.query_params.lists():
        if key not in OWN_PARAMS:
            params.setlist(key, values)
    filterset = _narrowed(spec.filterset, params)(params, queryset=queryset, request=request)
    if not filterset.is_valid():
        field, errors = next(iter(filterset.errors.items()))
        return _refuse(status.HTTP_400_BAD_REQUEST, field, " ".join(str(e) for e in errors))
    return filterset.qs


#: Query parameters that apply saved filters, whose stored parameters may name any filter
SAVED_FILTER_PARAMS = ("filter", "filter_id")


def _narrowed(filterset: type[Any], params: QueryDict) -> type[Any]:
    """The filterset with only the filters the query names (custom-field filters are always added).

    NetBox rebuilds every filter of a filterset, with all its lookups, on each instantiation, and django-
    filter then builds a form field for each: 375 filters and about 85 ms for devices, however few the
    query uses. The filters the query does not name would be applied with no value, which filters
    nothing, so leaving them out gives the same rows (tests/netbox/test_rows.py compares them with REST)
    for a few milliseconds. A filter is kept when a parameter is its name or starts with its name and
    `_` (a filter whose form field spans several parameters, `created_after`/`created_before`, keeps its
    own name apart). A query naming a saved filter gets the whole filterset."""
    if any(name in params for name in SAVED_FILTER_PARAMS):
        return filterset
    asked = list(params)
    named = frozenset(
        name for name in _filters_of(filterset) if any(p == name or p.startswith(f"{name}_") for p in asked)
    )
    return _narrowed_to(filterset, named)


@cache
def _filters_of(filterset: type[Any]) -> dict[str, Any]:
    """A filterset's filters as NetBox builds them once apps are ready (`get_filters()`)."""
    return dict(filterset.get_filters())


@lru_cache(maxsize=256)
def _narrowed_to(filterset: type[Any], names: frozenset[str]) -> type[Any]:
    only = {name: f for name, f in _filters_of(filterset).items() if name in names}
    return type(filterset.__name__, (filterset,), {"get_filters": classmethod(lambda cls: dict(only))})


@dataclass(frozen=True)
class Column:
    """One served field: its name, how a row renders it, and the relation loaded for it (joined or
    prefetched once for the page, never one query per row)."""

    name: str
    render: Render
    join: str | None = None
    prefetch: str | None = None


def _column(model: type[Model], name: str, field: serializers.Field) -> Column | None:
    """How one serializer field is served, or None when it is not: stored fields and related objects
    only (counts, links and computed fields need the REST route's own annotations and prefetches, which
    is what this route saves), and never a write-only field (a secret's stored form; REST hides it too)."""
    if field.write_only:
        return None
    stored = _model_field(model, field)
    relation = stored if isinstance(stored, ForeignKey | OneToOneField | ManyToManyField) else None
    loads = {} if relation is None or _source(field) == "*" else _loads(relation)
    nested = _nested(field)
    if nested is not None:
        flat = _flat(nested)
        if isinstance(field, serializers.ListSerializer | serializers.ManyRelatedField):
            source = field.source  # tags, tagged VLANs: lists of related objects
            return Column(
                name, lambda obj: [flat(item) for item in getattr(obj, source).all()], prefetch=source
            )
        return Column(name, lambda obj: _none_or(field, obj, flat), **loads)
    if loads or getattr(stored, "concrete", False):
        return Column(name, _as_rest(field), **loads)
    return None


def _loads(relation: Any) -> dict[str, str]:
    return {"prefetch" if isinstance(relation, ManyToManyField) else "join": relation.name}


def _loading(queryset: QuerySet[Any], columns: list[Column]) -> QuerySet[Any]:
    """Join or prefetch the relations the columns render (one query each, not one per row). Not NetBox's
    `get_prefetches_for_serializer`: it follows nested serializers into their own relations, which the
    flat rows never render, and so loads more than the comparison reads."""
    joined = [c.join for c in columns if c.join]
    prefetched = [c.prefetch for c in columns if c.prefetch]
    if joined:
        queryset = queryset.select_related(*joined)
    if prefetched:
        queryset = queryset.prefetch_related(*prefetched)
    return queryset


def _nested(field: serializers.Field) -> serializers.Field | None:
    """The nested model serializer a field renders related objects with (one or many), if any: a nested
    serializer, a list of them (tags), or NetBox's primary keys shown as objects (tagged VLANs)."""
    inner = getattr(field, "child", None) or getattr(field, "child_relation", None) or field
    if isinstance(inner, serializers.ModelSerializer):
        return inner
    shown_as = getattr(inner, "serializer", None)  # netbox.api.fields.SerializedPKRelatedField
    if isinstance(shown_as, type) and issubclass(shown_as, serializers.ModelSerializer):
        return shown_as(nested=getattr(inner, "nested", True), context=inner.context)
    return None


def _as_rest(field: serializers.Field) -> Render:
    """What DRF's Serializer.to_representation does for one field."""

    def render(obj: Model) -> Any:
        try:
            attribute = field.get_attribute(obj)
        except SkipField:
            return None
        check = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
        return None if check is None else field.to_representation(attribute)

    return render


def _none_or(field: serializers.Field, obj: Model, flat: Render) -> Any:
    related = field.get_attribute(obj)
    return None if related is None else flat(related)


def _flat(nested: serializers.Field) -> Render:
    """A related object as `{"id", <its plain brief fields>}`; related objects of its own as `{"id"}`."""
    model = nested.Meta.model
    plain: list[tuple[str, Render]] = []
    linked: list[tuple[str, str]] = []
    for name, field in nested.fields.items():
        if name in LINK_FIELDS or name == "id" or field.write_only:
            continue
        stored = _model_field(model, field)
        if isinstance(stored, ForeignKey | OneToOneField):
            linked.append((name, stored.attname))
        elif (
            not isinstance(stored, ManyToManyField)
            and getattr(stored, "concrete", False)
            and _nested(field) is None
        ):
            plain.append((name, _as_rest(field)))

    def render(obj: Model) -> dict[str, Any]:
        row: dict[str, Any] = {"id": obj.pk}
        for name, value in plain:
            row[name] = value(obj)
        for name, attname in linked:
            pk = getattr(obj, attname)
            row[name] = None if pk is None else {"id": pk}
        return row

    return render


def _source(field: serializers.Field) -> Any:
    return getattr(field, "source", None) or field.field_name


def _model_field(model: type[Model], field: serializers.Field) -> Any:
    """The model field a serializer field renders directly (a column or a relation), or None for an
    annotation, a count, a method or a dotted path."""
    source = _source(field)
    name = field.field_name if source == "*" else source
    if not isinstance(name, str) or "." in name:
        return None
    try:
        return model._meta.get_field(name)
    except FieldDoesNotExist:
        return None


def _whole(value: str | None, *, default: int, low: int, high: int) -> int | None:
    """A page parameter: its default when absent, None (refused) unless ASCII digits within range."""
    return default if value in (None, "") else numbers.decimal(value, low=low, high=high)


def _refuse(code: int, field: str, detail: str) -> Response:
    return Response({"field": field, "detail": detail}, status=code)
