"""The app's routes as one flat list, whichever way FastAPI stores included routers.

Older FastAPI copies an included router's routes into the app; newer keeps one ``_IncludedRouter`` per
``include_router`` call (its routes under ``original_router``). The backend includes every router without
a prefix (``app.ROUTERS``), so each leaf route's own ``path_regex`` is the one requests are matched by.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from re import Pattern

from starlette.routing import BaseRoute


def leaf_routes(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from leaf_routes(included.routes)
        else:
            yield route


def path_patterns(routes: Iterable[BaseRoute]) -> list[tuple[BaseRoute, Pattern[str]]]:
    """``(route, path_regex)`` of every leaf route that has one."""
    return [(r, rx) for r in leaf_routes(routes) if (rx := getattr(r, "path_regex", None)) is not None]
