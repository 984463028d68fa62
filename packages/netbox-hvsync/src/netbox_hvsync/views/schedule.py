"""The UI schedule form: queue a sync (now, later, or recurring; optionally in a working branch).

The form only collects values; the serializer REST `sync/schedule/` uses checks them (`scheduling`), so
the UI and REST accept exactly the same requests and name the same fields in their errors. The job is
queued through `enqueue_sync`, the one pipeline of REST, repair and the full-update button.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.utils.html import format_html
from django.views.generic import View
from utilities.forms.fields import DynamicModelChoiceField, DynamicModelMultipleChoiceField
from utilities.forms.widgets import DateTimePicker
from utilities.views import ConditionalLoginRequiredMixin

from netbox_hvsync import models
from netbox_hvsync.choices import SYNC_STAGES
from netbox_hvsync.jobs import enqueue_sync
from netbox_hvsync.scheduling import SCHEDULE_PERMISSIONS, SyncScheduleSerializer, missing_permissions
from netbox_hvsync.sync.branching import branching_installed

#: Serializer field -> form field, so a REST-side error lands on the field the operator filled in.
FORM_FIELD = {"hv_endpoint_ids": "hv_endpoints", "backend_endpoint_id": "backend_endpoint"}


class SyncScheduleForm(forms.Form):
    sync_types = forms.MultipleChoiceField(
        choices=[(s, s) for s in SYNC_STAGES],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Stages to run, in pipeline order; none ticked runs all 13",
    )
    hv_endpoints = DynamicModelMultipleChoiceField(
        queryset=models.HvEndpoint.objects.all(),
        required=False,
        label="Proxmox endpoints",
        help_text="None selected: every enabled endpoint",
    )
    backend_endpoint = DynamicModelChoiceField(
        queryset=models.BackendEndpoint.objects.all(),
        required=False,
        help_text="None selected: the first enabled backend holding a key",
    )
    schedule_at = forms.DateTimeField(
        required=False, widget=DateTimePicker(), help_text="Empty: run as soon as a worker is free"
    )
    interval = forms.IntegerField(min_value=1, required=False, help_text="Repeat every N minutes")
    use_branch = forms.BooleanField(
        required=False,
        label="Run in a branch",
        help_text="Write into a netbox-branching working branch, merged at the end",
    )

    def rest_body(self) -> dict[str, Any]:
        data = self.cleaned_data
        body: dict[str, Any] = {"use_branch": bool(data.get("use_branch"))}
        if data.get("sync_types"):
            body["sync_types"] = list(data["sync_types"])
        if data.get("hv_endpoints"):
            body["hv_endpoint_ids"] = [e.pk for e in data["hv_endpoints"]]
        if data.get("backend_endpoint"):
            body["backend_endpoint_id"] = data["backend_endpoint"].pk
        if data.get("schedule_at"):
            body["schedule_at"] = data["schedule_at"]
        if data.get("interval"):
            body["interval"] = data["interval"]
        return body


class SyncScheduleView(ConditionalLoginRequiredMixin, View):
    template_name = "netbox_hvsync/sync_schedule.html"

    def _forbidden(self) -> HttpResponse:
        return HttpResponseForbidden(
            f"scheduling a sync needs the {' and '.join(SCHEDULE_PERMISSIONS)} permissions"
        )

    def _form(self, request: HttpRequest, data: Any = None) -> SyncScheduleForm:
        """The form, its choices narrowed to the endpoints the user may view (the serializer checks again)."""
        form = SyncScheduleForm(data)
        form.fields["hv_endpoints"].queryset = models.HvEndpoint.objects.restrict(request.user, "view")
        form.fields["backend_endpoint"].queryset = models.BackendEndpoint.objects.restrict(
            request.user, "view"
        )
        return form

    def _render(self, request: HttpRequest, form: SyncScheduleForm) -> HttpResponse:
        return render(request, self.template_name, {"form": form, "branching": branching_installed()})

    def get(self, request: HttpRequest) -> HttpResponse:
        if missing_permissions(request.user):
            return self._forbidden()
        return self._render(request, self._form(request))

    def post(self, request: HttpRequest) -> HttpResponse:
        if missing_permissions(request.user):
            return self._forbidden()
        form = self._form(request, request.POST)
        if not form.is_valid():
            return self._render(request, form)
        body = SyncScheduleSerializer(data=form.rest_body(), context={"user": request.user})
        if not body.is_valid():
            for field, errors in body.errors.items():
                target = FORM_FIELD.get(field, field)
                for error in errors if isinstance(errors, list) else [errors]:
                    form.add_error(target if target in form.fields else None, str(error))
            return self._render(request, form)
        job = enqueue_sync(user=request.user, **body.validated_data)
        messages.success(
            request, format_html('Sync queued: <a href="{}">job {}</a>', job.get_absolute_url(), job.pk)
        )
        return redirect(job.get_absolute_url())
