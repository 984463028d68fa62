"""``GET /metrics``: this instance's Prometheus exposition, behind the API key unless configured public.

Counters say how often and from where keys fail and which upstreams answer what; that is worth the key by
default. ``HVSYNC_METRICS_PUBLIC=true`` opens the route for a scraper that cannot send a header.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Security
from fastapi.responses import Response

from hvsync_backend.api.deps import Ctx
from hvsync_backend.auth.dependency import AUTH_RESPONSES, api_key_header, require_api_key

router = APIRouter(tags=["service"])


async def metrics_access(request: Request, presented: str | None = Security(api_key_header)) -> None:
    """The API key, as on every protected route, unless the operator made the metrics public."""
    if not request.app.state.context.settings.metrics_public:
        await require_api_key(request, presented)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format 0.0.4 (docs/metrics.md)",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **AUTH_RESPONSES,
    },
)
async def metrics(context: Ctx, _: None = Security(metrics_access)) -> Response:
    """The backend's counters, gauges and histograms (sync runs, objects written, upstream requests, auth)."""
    body, content_type = context.metrics.render()
    return Response(body, media_type=content_type)
