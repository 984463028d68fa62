"""Approve or reject a deletion request from its page (four eyes; rules in rules.deletion).

REST keeps deletion requests read-only (SPEC 4.4); deciding is a UI action under the model's change
permission, restricted per object like every NetBox edit. The row is locked while it is decided, so two
people clicking at once cannot both decide it.
"""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.views.generic import View
from utilities.views import ConditionalLoginRequiredMixin

from netbox_hvsync.models import DeletionRequest
from netbox_hvsync.rules.deletions import APPROVED, Decider, decision_refusal

DECIDE_PERMISSION = "netbox_hvsync.change_deletionrequest"


class DeletionRequestDecideView(ConditionalLoginRequiredMixin, View):
    decision = ""

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        if not request.user.has_perm(DECIDE_PERMISSION):
            return HttpResponseForbidden(f"deciding a deletion request needs {DECIDE_PERMISSION}")
        allowed = DeletionRequest.objects.restrict(request.user, "change")
        with transaction.atomic():
            row = get_object_or_404(allowed.select_for_update(), pk=pk)
            decider = Decider(request.user.pk, True, request.user.is_superuser)
            refusal = decision_refusal(row.status, row.requested_by_id, decider, self.decision)
            if refusal:
                messages.error(request, f"Not {self.decision}: {refusal.message}")
                return redirect(row.get_absolute_url())
            row.snapshot()
            row.status = self.decision
            row.decided_at = timezone.now()
            if self.decision == APPROVED:
                row.decided_by = request.user
            row.full_clean()
            row.save()
        messages.success(request, f"Deletion request {row.pk} {self.decision} by {request.user}")
        return redirect(row.get_absolute_url())
