"""The body of a sync job (SPEC 1.B.3, 4.5, 6, 7.3): load, preflight, scope, local reconciliation, stages.

The rules (`rules/`) decide everything: preflight order and blocking conditions, wire ids, stage attempts
and retries, failure kinds, composed messages, redaction. `SyncRun` feeds them models and HTTP and
writes what happened into the job: progress in the job log, the record in `job.data["sync"]`, the composed message
in `job.error`. Job data is saved before any raise, so a failed job still shows what ran.

This module is the job's course from start to end; its parts live beside it: the preflight
(`sync.preflight`), the stage loop (`sync.stage_loop`), selected objects (`sync.selected`) and the
recorded state every part writes through (`sync.state`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from core.models import Job
from netbox_hvsync.backend.adoption import adopt_stored_keys
from netbox_hvsync.backend.push import hv_record, inventory_record
from netbox_hvsync.backend.resolution import ResolvedBackend, resolve_backend
from netbox_hvsync.choices import SyncModeChoices
from netbox_hvsync.crypto import CredentialDecryptionError
from netbox_hvsync.models import HvEndpoint, InventoryEndpoint
from netbox_hvsync.rules.branches import BranchNotReady
from netbox_hvsync.rules.push import HV_PATH, list_rows
from netbox_hvsync.rules.records import secrets_of
from netbox_hvsync.rules.redaction import redact
from netbox_hvsync.rules.scope import NO_STAGE_RAN, ScopeError, SyncModes, selected_scope, staged_job_failure
from netbox_hvsync.rules.wire_ids import resolve_wire_ids
from netbox_hvsync.sync import reconciliation
from netbox_hvsync.sync.branching import (
    BranchingUnavailable,
    BranchSetupFailed,
    create_working_branch,
    finish_working_branch,
    require_branch_ready,
)
from netbox_hvsync.sync.lookups import ClusterLookups
from netbox_hvsync.sync.preflight import PreflightPhase
from netbox_hvsync.sync.selected import SELECTED_TYPES, VM_TYPE, run_objects, unknown_type_message
from netbox_hvsync.sync.stage_loop import STAGE_ROUTES, StageLoop, selected_stages
from netbox_hvsync.sync.state import SyncJobFailed

#: Read-only backend routes used for local reconciliation (cluster, nodes, firewall, datacenter, templates).
RECONCILE_ROUTES: Mapping[str, str] = reconciliation.RECONCILE_ROUTES


def endpoint_sync_modes(rows: Sequence[HvEndpoint]) -> dict[int, SyncModes]:
    """Each hv endpoint's sync modes, taken from the rows the job loaded once (no second query)."""
    return {row.pk: SyncModes(vm=row.sync_mode_vm, vm_template=row.sync_mode_vm_template) for row in rows}


class SyncRun(PreflightPhase, StageLoop):
    """One execution of a sync job; `run()` either returns (completed) or raises SyncJobFailed."""

    def run(self) -> None:
        hv_ids = [int(i) for i in self.block.get("hv_endpoint_ids") or []]
        hv_qs = HvEndpoint.objects.select_related("ip_address").order_by("pk")
        hv_rows = list(hv_qs.filter(pk__in=hv_ids) if hv_ids else hv_qs.filter(enabled=True))
        inventory_rows = list(InventoryEndpoint.objects.select_related("ip_address").order_by("pk"))
        try:
            inventory_records = [self.decrypted(inventory_record, r) for r in inventory_rows]
            hv_records = [self.decrypted(hv_record, r) for r in hv_rows]
        except CredentialDecryptionError as exc:
            raise self.fail(str(exc)) from None
        for record in (*inventory_records, *hv_records):
            self.secrets.extend(secrets_of(record))
        self.block["endpoints"] = {r.pk: {"name": r.name} for r in hv_records}
        self.sync_modes = endpoint_sync_modes(hv_rows)

        unadopted = adopt_stored_keys(self.block.get("backend_endpoint_id"))
        resolved = resolve_backend(self.block.get("backend_endpoint_id"))
        if resolved is not None:
            self.secrets.append(resolved.context.api_key)
            resolved = self.pick_candidate(resolved)
        try:
            report = self.preflight(resolved, inventory_records, hv_records, unadopted)
            assert resolved is not None  # the preflight raises B1 otherwise
            self.block["backend_endpoint_id"] = resolved.row.pk
            if self.block.get("mode") == SyncModeChoices.SELECTED:
                self.selected_objects(resolved, hv_records, report.hint)
                return
            resolution = self.resolve_scope(resolved, hv_records)
            if self.block.get("use_branch"):
                self.branched_run(resolved, resolution, report.hint)
                return
            self.reconcile_locally(resolved, resolution.backend_ids_csv)
            self.stage_loop(resolved, resolution, report.hint)
        finally:
            if resolved is not None:
                resolved.transport.close()

    def resolve_scope(self, resolved: ResolvedBackend, hv_records: list) -> Any:
        """Wire ids from one fresh listing (pushes may have just created rows)."""
        listing = list_rows(
            resolved.transport, resolved.context, HV_PATH, timeout=15.0, secrets=tuple(self.secrets)
        )
        if not listing.ok:
            raise self.fail(f"{NO_STAGE_RAN}: listing the backend's hv endpoints failed: {listing.error}")
        resolution = resolve_wire_ids(hv_records, listing.rows)
        for pk, backend_id in resolution.scope_map.items():
            self.block["endpoints"][pk]["backend_id"] = backend_id
        for pk, reason in resolution.dropped.items():
            self.block["endpoints"][pk]["dropped"] = reason
            self.logger.warning("scope: %s", reason)
        self.block["scope"] = resolution.backend_ids_csv
        if not resolution.scope_map:
            message = staged_job_failure(resolution, [])
            raise self.fail(message or NO_STAGE_RAN)
        return resolution

    def branched_run(self, resolved: ResolvedBackend, resolution: Any, hint: str) -> None:
        """SPEC 3.3: every stage writes into the job's own working branch (the backend sends
        `X-NetBox-Branch`), and the end of the job merges it, archives it, or leaves it open."""
        user = getattr(self.job, "user", None)
        try:
            branch = create_working_branch(str(self.block["run_id"]), user)
            require_branch_ready(branch, user, "local activation")
        except (BranchingUnavailable, BranchSetupFailed, BranchNotReady) as exc:
            raise self.fail(f"{NO_STAGE_RAN}: {exc}") from None
        info: dict[str, Any] = {"id": branch.pk, "name": branch.name, "schema_id": branch.schema_id}
        self.block["branch"] = info
        self.logger.info("working branch %s (schema %s) is ready", branch.name, branch.schema_id)
        reconciliation_ok = self.reconcile_locally(resolved, resolution.backend_ids_csv)
        try:
            self.stage_loop(resolved, resolution, hint, {"inventory_branch_schema_id": branch.schema_id})
        except SyncJobFailed:
            info["disposition"] = self.block["branch_disposition"] = "left_open"
            self.logger.error("merge of branch %s skipped: the sync failed; branch left open", branch.name)
            self.save()
            raise
        outcome = finish_working_branch(
            branch, user, reconciliation_ok=reconciliation_ok, persist_evidence=self.save
        )
        info["disposition"] = self.block["branch_disposition"] = outcome.disposition.value
        info["name"] = outcome.data.get("branch", branch.name)
        for line in outcome.log:
            self.logger.info(line)
        if outcome.job_failed:
            raise self.fail(outcome.message)
        self.logger.info(outcome.message)
        self.save()

    def reconcile_locally(self, resolved: ResolvedBackend, scope_csv: str) -> bool:
        """Cluster, nodes, firewall, datacenter options and templates of every endpoint in scope, read
        through the job's backend with its backend ids, never a URL (`netbox_hvsync.sync.reconciliation`).

        Recorded per part and endpoint. A failed part is a warning, not a stop (the stages report the same
        endpoint's failure in more detail), and classifies the reconciliation unsuccessful: a branched job
        then skips the merge. Template differences with NetBox are logged as warnings; nothing is written."""
        started = time.monotonic()
        in_scope = [(pk, e) for pk, e in (self.block.get("endpoints") or {}).items() if e.get("backend_id")]
        pk_of = {int(e["backend_id"]): int(pk) for pk, e in in_scope}
        names = {int(e["backend_id"]): str(e.get("name") or pk) for pk, e in in_scope}
        outcome = reconciliation.reconcile(resolved.transport, resolved.context, scope_csv, names, pk_of)
        record = {**outcome.record(), "duration_ms": self._ms(started)}
        self.block["reconciliation"] = redact(record, self.secrets)
        for warning in outcome.warnings:
            self.logger.warning("local reconciliation: %s", warning)
        if not outcome.ok:
            failed = ", ".join(outcome.failed_parts)
            message = f"local reconciliation was unsuccessful for some endpoint(s): {failed}"
            self.block["warnings"].append(message)
            self.logger.warning(message)
        else:
            self.logger.info(
                "local reconciliation (%s) done in %d ms", ", ".join(RECONCILE_ROUTES), record["duration_ms"]
            )
        self.save()
        return outcome.ok

    def selected_objects(self, resolved: ResolvedBackend, hv_records: list, hint: str) -> None:
        """SPEC 4.5 "Selected-objects job": scope right after the preflight, then one pinned
        `/sync/individual/<kind>` call per object (netbox_hvsync.sync.selected); any failed object fails
        the job."""
        batch_type = self.block.get("batch_object_type") or VM_TYPE
        listing = list_rows(
            resolved.transport, resolved.context, HV_PATH, timeout=15.0, secrets=tuple(self.secrets)
        )
        if not listing.ok:
            raise self.fail(
                f"Selected-object sync did not run: listing the backend's hv endpoints failed: {listing.error}"
            )
        resolution = resolve_wire_ids(hv_records, listing.rows)
        try:
            job_scope, warnings = selected_scope(resolution)
        except ScopeError as exc:
            raise self.fail(str(exc)) from None
        for warning in warnings:
            self.block["warnings"].append(warning)
            self.logger.warning(warning)
        self.block["scope"] = job_scope
        if batch_type not in SELECTED_TYPES:
            raise self.fail(unknown_type_message(batch_type))
        run_objects(self, resolved, resolution.scope_map, job_scope, ClusterLookups(), hint)


def run_sync_job(job: Job, logger: logging.Logger, block: Mapping[str, Any]) -> None:
    """Entry point for `SyncJob.run()`."""
    SyncRun(job, logger, block).run()


__all__ = ["STAGE_ROUTES", "ScopeError", "SyncJobFailed", "SyncRun", "run_sync_job", "selected_stages"]
