"""Approve or reject deletion requests from their page, or several at once from the list (issue 40).

REST keeps deletion requests read-only (SPEC 4.4) with two actions; the UI decides through the same
functions (`deletions.approve` / `deletions.reject`, rules in `rules.deletions`): a refusal for who you are
(no `approve_deletionrequest`, or the requester approving) is a 403, a request that is no longer pending an
error message. Approving applies at once, so the page shows the request `applied`, `failed` or `withdrawn`.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.generic import View
from netbox.object_actions import ObjectAction
from utilities.views import ConditionalLoginRequiredMixin

from netbox_hvsync import deletions
from netbox_hvsync.models import DeletionRequest
from netbox_hvsync.rules.deletions import APPROVE_PERMISSION, APPROVED, REJECTED
from netbox_hvsync.wire.numbers import decimal

COMMENT_MAX = 2000
DECIDE = {APPROVED: deletions.approve, REJECTED: deletions.reject}


def _comment(request: HttpRequest) -> str:
    return (request.POST.get("comment") or "").strip()[:COMMENT_MAX]


class DeletionRequestDecideView(ConditionalLoginRequiredMixin, View):
    """POST `comment` to `deletion-requests/<pk>/approve/` or `.../reject/`."""

    decision = ""

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        if not request.user.has_perm(APPROVE_PERMISSION):
            return HttpResponseForbidden(f"deciding a deletion request needs {APPROVE_PERMISSION}")
        row = get_object_or_404(DeletionRequest.objects.restrict(request.user, "view"), pk=pk)
        try:
            row = DECIDE[self.decision](row, user=request.user, comment=_comment(request))
        except deletions.DecisionRefused as refused:
            if refused.kind == "forbidden":
                return HttpResponseForbidden(refused.message)
            messages.error(request, f"Not {self.decision}: {refused.message}")
            return redirect(row.get_absolute_url())
        level = messages.error if row.status == "failed" else messages.success
        level(request, f"Deletion request {row.pk} {row.status}" + (f": {row.error}" if row.error else ""))
        return redirect(row.get_absolute_url())


class DeletionRequestBulkDecideView(ConditionalLoginRequiredMixin, View):
    """Bulk approve/reject as NetBox's bulk actions look: the list's selection, a confirmation page with a
    comment, then each request decided on its own (one refused request does not stop the others)."""

    decision = ""
    template_name = "netbox_hvsync/deletionrequest_bulk_decide.html"

    def post(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm(APPROVE_PERMISSION):
            return HttpResponseForbidden(f"deciding a deletion request needs {APPROVE_PERMISSION}")
        numbers = (decimal(pk, low=1, high=2**63 - 1) for pk in request.POST.getlist("pk")[:1000])
        pks = [pk for pk in numbers if pk is not None]
        rows = list(DeletionRequest.objects.restrict(request.user, "view").filter(pk__in=pks).order_by("pk"))
        list_url = reverse("plugins:netbox_hvsync:deletionrequest_list")
        if not rows:
            messages.warning(request, "No deletion request selected.")
            return redirect(list_url)
        if "_confirm" not in request.POST:
            return render(
                request,
                self.template_name,
                {"decision": self.decision, "rows": rows, "return_url": list_url, "model": DeletionRequest},
            )
        outcome: dict[str, list[str]] = {}
        refused: list[str] = []
        for row in rows:
            try:
                done = DECIDE[self.decision](row, user=request.user, comment=_comment(request))
            except deletions.DecisionRefused as exc:
                refused.append(f"{row.pk} ({exc.message})")
                continue
            outcome.setdefault(done.status, []).append(str(done.pk))
        for status, ids in sorted(outcome.items()):
            messages.success(request, f"{len(ids)} deletion request(s) {status}: {', '.join(ids)}")
        if refused:
            messages.error(request, f"Not {self.decision}: {'; '.join(refused)}")
        return redirect(list_url)


class BulkDecide(ObjectAction):
    """A list-view button (NetBox's bulk action style) that posts the selection to a bulk decision."""

    multi = True
    permissions_required = {"approve"}
    template_name = "netbox_hvsync/buttons/bulk_decide.html"
    css = ""
    icon = ""

    @classmethod
    def get_context(cls, context: Any, obj: Any) -> dict[str, Any]:
        return {"css": cls.css, "icon": cls.icon, "action_name": cls.name}


class BulkApprove(BulkDecide):
    name = "bulk_approve"
    label = "Approve Selected"
    css = "btn-green"
    icon = "mdi-check-all"


class BulkReject(BulkDecide):
    name = "bulk_reject"
    label = "Reject Selected"
    css = "btn-orange"
    icon = "mdi-close-box-multiple-outline"
