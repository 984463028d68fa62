"""Runs inside NetBox (`netbox shell`), started by bench_resync_reads.py on its synced NetBox: what building
a route's filterset costs, whole (as NetBox's REST list does) and narrowed to the filters the query names
(as the plugin's rows route does), for reads a one-VM change makes.

Per query: the filterset made, validated and its ids read, `HVSYNC_FILTERS_REPEAT` times each way after a
warm-up; the median and the spread in milliseconds, the number of filters each way, and whether both
selected the same ids (they must). Writes the JSON to the path in HVSYNC_FILTERS_OUT.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

from dcim.filtersets import DeviceFilterSet, SiteFilterSet
from dcim.models import Site
from django.http import QueryDict
from netbox_hvsync.api.rows import _filters_of, _narrowed
from virtualization.filtersets import VirtualMachineFilterSet
from virtualization.models import VirtualMachine

REPEAT = int(os.environ.get("HVSYNC_FILTERS_REPEAT", "20"))
KEY = "hvsync_key"


def query(**params: list[str]) -> QueryDict:
    out = QueryDict(mutable=True)
    for name, values in params.items():
        out.setlist(name, values)
    return out


def ids(filterset: type[Any], params: QueryDict, queryset: Any) -> list[int]:
    made = filterset(params, queryset=queryset)
    if not made.is_valid():
        raise SystemExit(f"{filterset.__name__} refused {dict(params.lists())}: {made.errors}")
    return list(made.qs.values_list("pk", flat=True))


def timed(filterset: type[Any], params: QueryDict, queryset: Any) -> tuple[list[float], list[int]]:
    found = ids(filterset, params, queryset)  # warm-up: imports, caches, the narrowed class
    runs = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        ids(filterset, params, queryset)
        runs.append((time.perf_counter() - started) * 1000)
    return runs, found


def measure(label: str, filterset: type[Any], params: QueryDict, queryset: Any) -> dict[str, Any]:
    narrowed = _narrowed(filterset, params)
    whole_ms, whole_ids = timed(filterset, params, queryset)
    narrow_ms, narrow_ids = timed(narrowed, params, queryset)
    return {
        "query": label,
        "filters_whole": len(_filters_of(filterset)),
        "filters_narrowed": len(narrowed.get_filters()),
        "rows": len(whole_ids),
        "same_rows": sorted(whole_ids) == sorted(narrow_ids),
        "whole_ms": round(statistics.median(whole_ms), 2),
        "narrowed_ms": round(statistics.median(narrow_ms), 2),
        "whole_ms_range": [round(min(whole_ms), 2), round(max(whole_ms), 2)],
        "narrowed_ms_range": [round(min(narrow_ms), 2), round(max(narrow_ms), 2)],
    }


def main() -> None:
    site = Site.objects.order_by("pk").first()
    vm = VirtualMachine.objects.filter(**{f"custom_field_data__{KEY}__isnull": False}).order_by("pk").first()
    if site is None or vm is None:
        raise SystemExit("no synced site or VM in this NetBox: run the sync first")
    vm_key = vm.custom_field_data[KEY]
    queries = [
        ("dcim/devices?tag=hvsync", DeviceFilterSet, query(tag=["hvsync"])),
        (f"dcim/sites?slug={site.slug}", SiteFilterSet, query(slug=[site.slug])),
        (
            "virtualization/virtual-machines?tag=hvsync&cf_hvsync_key__isw=<one VM's key>",
            VirtualMachineFilterSet,
            query(tag=["hvsync"], **{f"cf_{KEY}__isw": [vm_key]}),
        ),
    ]
    result = {
        "repeat": REPEAT,
        "queries": [measure(label, fs, params, fs.Meta.model.objects.all()) for label, fs, params in queries],
    }
    with open(os.environ["HVSYNC_FILTERS_OUT"], "w") as out:
        json.dump(result, out, indent=2)


if __name__ in ("__main__", "hvsync_rows_filters"):
    main()
