"""`/plugins/hvsync/sync-runs/<job pk>/`: one sync job as an operator reads it, live while it runs.

Modelled on NetBox's own job views: `core.view_job` on the job (restricted queryset, so a job outside the
user's object permissions is a 404), and any core job that is not an hvsync sync is a 404 too. An HTMX
request gets only the body partial; while the job is pending or running the partial re-fetches itself
every 2 s (as NetBox's script result does), and a finished job's partial carries no polling attributes.
"""

from __future__ import annotations

from typing import Any

from core.models import Job
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from netbox.views import generic
from users.models import Token
from utilities.htmx import htmx_partial

from netbox_hvsync.models import InventoryEndpoint
from netbox_hvsync.querysets import sync_jobs
from netbox_hvsync.views.run_report import build_report

PAGE_TEMPLATE = "netbox_hvsync/sync_run.html"
PARTIAL_TEMPLATE = "netbox_hvsync/inc/sync_run_body.html"


def backend_netbox_user() -> Any:
    """The NetBox user the backend writes as, when the plugin can know it: the one user behind the v2
    tokens (looked up by their public key, never the secret) of the inventory endpoints; None when there
    is none or more than one, and the change-log link then filters on the time window alone."""
    keys = [
        key
        for key in InventoryEndpoint.objects.filter(enabled=True).values_list("token_key", flat=True)
        if key
    ]
    users = {t.user for t in Token.objects.filter(key__in=keys).select_related("user")} if keys else set()
    return users.pop() if len(users) == 1 else None


class SyncRunView(generic.ObjectView):
    queryset = sync_jobs(Job.objects.select_related("user"))
    template_name = PAGE_TEMPLATE
    actions = ()

    def get_required_permission(self) -> str:
        return "core.view_job"

    def get(self, request: HttpRequest, **kwargs: Any) -> HttpResponse:
        job = self.get_object(**kwargs)
        http_inventory = InventoryEndpoint.objects.filter(enabled=True, scheme="http").values_list(
            "pk", flat=True
        )
        report = build_report(
            job,
            reverse("core:objectchange_list"),
            backend_netbox_user(),
            [str(pk) for pk in http_inventory],
        )
        context = {"object": job, "report": report, "run_url": request.path}
        if htmx_partial(request):
            return render(request, PARTIAL_TEMPLATE, context)
        return render(request, self.template_name, context)
