"""The body of a sync job (SPEC 1.B.3, 4.5, 6, 7.3): preflight, scope, local reconciliation, stage loop.

The rules (`rules/`) decide everything: preflight order and blocking conditions, wire ids, stage attempts
and retries, failure kinds, composed messages, redaction. This module feeds them models and HTTP and
writes what happened into the job: progress in the job log, the record in `job.data["sync"]`, the composed message
in `job.error`. Job data is saved before any raise, so a failed job still shows what ran.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar

from core.models import Job
from netbox_hvsync import wire
from netbox_hvsync.backend.adoption import adopt_stored_keys
from netbox_hvsync.backend.failover import probe_candidates, run_on_candidates
from netbox_hvsync.backend.push import (
    fingerprint_key,
    hv_record,
    inventory_record,
    record_hv_push,
    record_inventory_push,
)
from netbox_hvsync.backend.resolution import ResolvedBackend, backend_target, resolve_backend
from netbox_hvsync.choices import SYNC_STAGES, SYNC_TYPE_ALL, SyncModeChoices
from netbox_hvsync.crypto import CredentialDecryptionError, undecryptable
from netbox_hvsync.models import HvEndpoint, InventoryEndpoint
from netbox_hvsync.rules.adoption import recheck_stored_key
from netbox_hvsync.rules.branches import BranchNotReady
from netbox_hvsync.rules.failures import APPLICATION
from netbox_hvsync.rules.preflight import PreflightBlocked, append_hint, http_steps, run_preflight
from netbox_hvsync.rules.push import HV_PATH, list_rows
from netbox_hvsync.rules.records import secrets_of
from netbox_hvsync.rules.redaction import redact, sweep_text
from netbox_hvsync.rules.scope import (
    NO_STAGE_RAN,
    ScopeError,
    StageCall,
    StageRecord,
    SyncModes,
    selected_scope,
    stage_calls,
    staged_job_failure,
)
from netbox_hvsync.rules.stage_runner import StageRun, run_stage
from netbox_hvsync.rules.transport import BackendContext
from netbox_hvsync.rules.urls import CanonicalTarget
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
from netbox_hvsync.sync.selected import SELECTED_TYPES, VM_TYPE, run_objects, unknown_type_message
from netbox_hvsync.sync.state import RunState, StepTimer, SyncJobFailed

#: Backend stream route of each stage, in pipeline order (wire data shared with the backend).
STAGE_ROUTES: Mapping[str, str] = wire.STAGE_ROUTES

#: Read-only backend routes used for local reconciliation (cluster, nodes, firewall, datacenter, templates).
RECONCILE_ROUTES: Mapping[str, str] = reconciliation.RECONCILE_ROUTES
#: How many `object` problem frames of one stage are copied into the job log.
STEP_PROBLEM_LOG_LIMIT = 10
#: How many failed objects of one stage's `complete` frame are kept in its job-data entry.
FAILED_OBJECTS_LIMIT = 50

Record = TypeVar("Record")


def selected_stages(sync_types: Sequence[str] | None) -> list[str]:
    """Pipeline order is kept whatever order the types were given in; `all` or nothing selects every stage."""
    wanted = set(sync_types or [SYNC_TYPE_ALL])
    if SYNC_TYPE_ALL in wanted:
        return list(SYNC_STAGES)
    return [stage for stage in SYNC_STAGES if stage in wanted]


def endpoint_sync_modes(rows: Sequence[HvEndpoint]) -> dict[int, SyncModes]:
    """Each hv endpoint's sync modes, taken from the rows the job loaded once (no second query)."""
    return {row.pk: SyncModes(vm=row.sync_mode_vm, vm_template=row.sync_mode_vm_template) for row in rows}


class SyncRun(RunState):
    """One execution of a sync job; `run()` either returns (completed) or raises SyncJobFailed."""

    #: the loaded hv endpoints' sync modes, set by `run()`; an endpoint missing here has the default modes
    sync_modes: Mapping[int, SyncModes] = MappingProxyType({})

    # -- the job -----------------------------------------------------------------------------------

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

    @staticmethod
    def decrypted(record_of: Callable[[Any], Record], row: Any) -> Record:
        """A row's record with its credentials; a row whose credentials do not decrypt with the configured
        key (PLUGINS_CONFIG `encryption_key` changed) fails the job by name, before anything is sent."""
        try:
            return record_of(row)
        except CredentialDecryptionError:
            raise CredentialDecryptionError(undecryptable(row)) from None

    def pick_candidate(self, resolved: ResolvedBackend) -> ResolvedBackend:
        """Hostname first, then IP (SPEC 6.2): use the first address of the backend that answers."""
        picked, probes = probe_candidates(resolved)
        if probes:
            self.block["backend_candidates"] = probes
            if picked.context != resolved.context:
                self.logger.warning(
                    "backend %s did not answer at %s; using %s",
                    resolved.row.pk,
                    resolved.context.base_url,
                    picked.context.base_url,
                )
        return picked

    def preflight(
        self,
        resolved: ResolvedBackend | None,
        inventory_records: list,
        hv_records: list,
        unadopted: Sequence[str] = (),
    ) -> Any:
        started = time.monotonic()
        self.logger.info(
            "preflight: %d inventory endpoint(s), %d hv endpoint(s) in scope",
            len(inventory_records),
            len(hv_records),
        )

        def resolve_context(selected: int | None) -> BackendContext | None:
            return resolved.context if resolved is not None else None

        transport = resolved.transport if resolved is not None else None
        steps = http_steps(transport, resolve_context, fingerprint_key())  # type: ignore[arg-type]
        push_inventory, push_hv = steps.push_inventory, steps.push_hv

        def push_inventory_and_record(ctx: BackendContext, record: Any) -> Any:
            result = push_inventory(ctx, record)
            record_inventory_push(record.pk, record, result)
            return result

        def push_hv_and_record(ctx: BackendContext, record: Any, rows: Any) -> Any:
            result = push_hv(ctx, record, rows)
            record_hv_push(record, result)
            return result

        steps.push_inventory = push_inventory_and_record
        steps.push_hv = push_hv_and_record
        try:
            report = run_preflight(
                steps,
                inventory_endpoints=inventory_records,
                hv_endpoints=hv_records,
                selected_backend_id=self.block.get("backend_endpoint_id"),
                unusable=unadopted,
            )
        except PreflightBlocked as exc:
            self.block["preflight"] = {"blocked": exc.code, "duration_ms": self._ms(started)}
            raise self.fail(f"Preflight blocked the sync: {exc}") from None
        for warning in report.warnings:
            self.logger.warning("preflight: %s", sweep_text(warning, self.secrets))
        self.block["preflight"] = {
            "duration_ms": self._ms(started),
            "phases": report.phases,
            "inventory_pushes": {
                pk: {"ok": r.ok, "status": r.status} for pk, r in report.inventory_results.items()
            },
            "hv_pushes": {
                pk: {"ok": r.ok, "status": r.status, "backend_id": r.backend_id}
                for pk, r in report.hv_results.items()
            },
            "skipped_hv": {pk: d.value for pk, d in report.skipped_hv.items()},
        }
        self.block["warnings"].extend(report.warnings)
        self.logger.info("preflight done in %d ms", self.block["preflight"]["duration_ms"])
        self.save()
        return report

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

    def stage_loop(
        self,
        resolved: ResolvedBackend,
        resolution: Any,
        hint: str,
        extra_params: Mapping[str, str] | None = None,
    ) -> None:
        stages = selected_stages(self.block.get("sync_types"))
        # `job`: the backend can then stop these runs when the job is cancelled (POST /sync/cancel)
        base_params = {"job": str(self.block["run_id"]), **(extra_params or {})}
        modes = self.sync_modes
        runtime: dict[str, Any] = self.block["runtime"].setdefault("endpoints", {})
        records: list[StageRecord] = []
        failures: list[str] = []
        for index, stage in enumerate(stages, 1):
            self.logger.info("stage %d/%d %s: started", index, len(stages), stage)
            calls, skipped = stage_calls(stage, resolution.scope_map, modes)
            records.extend(skipped)
            for record in skipped:
                self.logger.info(
                    "stage %s: hv endpoint %s skipped (%s)", stage, record.endpoint_pk, record.reason
                )
            stop = False
            for call in calls:
                self.begin_progress(stage, index, len(stages))
                params = {"hv_endpoint_ids": call.backend_ids_csv, **call.modes.query, **base_params}
                try:
                    run, entry, resolved = self._stage_call(resolved, stage, call, params, runtime)
                finally:
                    self.end_progress()
                if len(calls) > 1 or call.modes != SyncModes():
                    entry["hv_endpoints"] = sorted(call.scope_map)
                    entry["sync_modes"] = {"vm": call.modes.vm, "vm_template": call.modes.vm_template}
                self.block["stages"].append(entry)
                records.extend(StageRecord(pk, stage, ran=True) for pk in call.scope_map)
                if run.ok:
                    continue
                failures.append(run.message)
                self.logger.error("stage %s failed: %s", stage, run.message)
                if run.advisory:
                    self.logger.warning("stage %s: %s", stage, run.advisory)
                if run.recheck_key:
                    self._recheck_key(resolved, entry)
                if run.failure_payload and run.failure_payload.get("failure_kind") != APPLICATION:
                    skipped_stages = stages[index:]
                    if skipped_stages:
                        self.block["skipped_stages"] = skipped_stages
                        self.logger.warning(
                            "stopping: the backend did not answer stage %s; not run: %s",
                            stage,
                            ", ".join(skipped_stages),
                        )
                    stop = True
                    break
                if run.status == 401:
                    stop = True
                    break
            self.save()
            if stop:
                break
        self.block["runtime"]["total_ms"] = self._ms(self.started)
        scope_failure = staged_job_failure(resolution, records)
        if failures:
            message = "; ".join(failures)
            if scope_failure:
                message = f"{scope_failure}; {message}"
            raise self.fail(append_hint(message, hint))
        if scope_failure:
            raise self.fail(append_hint(scope_failure, hint))
        self.logger.info(
            "sync finished: %d stage(s) ran in %d ms", len(stages), self.block["runtime"]["total_ms"]
        )
        self.save()

    def _stage_call(
        self,
        resolved: ResolvedBackend,
        stage: str,
        call: StageCall,
        params: Mapping[str, str],
        runtime: dict[str, Any],
    ) -> tuple[StageRun, dict[str, Any], ResolvedBackend]:
        """One stream of one stage for the endpoints of `call`, on the first backend address that answers;
        records each endpoint's time and returns the run, its job-data entry and the address now in use."""
        timer = StepTimer()
        problems = 0
        transport = resolved.transport

        def on_step(step: dict[str, Any]) -> None:
            nonlocal problems
            now = time.monotonic()
            timer.see(step.get("endpoint_id"), now)
            self.see_progress(step, now)
            if step.get("phase") == "object" and problems < STEP_PROBLEM_LOG_LIMIT:
                problems += 1
                self.logger.warning("stage %s: %s", stage, str(step.get("message") or "")[:300])

        def run_one(ctx: BackendContext) -> StageRun:
            url = ctx.url(STAGE_ROUTES[stage])
            return run_stage(
                stage,
                lambda: transport.open_stream(url, headers=ctx.auth_headers(), params=dict(params)),
                known_secrets=self.secrets,
                on_step=on_step,
            )

        stage_started = time.monotonic()
        run, answered, tried = run_on_candidates(resolved, run_one)
        if answered != resolved.context:
            self.logger.warning("stage %s: switched the backend address to %s", stage, answered.base_url)
            resolved = resolved.using(answered)
        elapsed = self._ms(stage_started)
        # Endpoints of one stage run concurrently in the backend: an endpoint named by the stage's
        # frames gets its measured span, the others the stage's wall time (they were in it throughout).
        measured = timer.durations_ms()
        for pk, backend_id in call.scope_map.items():
            slot = runtime.setdefault(str(pk), {"backend_id": backend_id, "stages_ms": {}})
            slot["stages_ms"][stage] = measured.get(backend_id, elapsed)
        entry = self._stage_entry(run, elapsed)
        if tried:
            entry["candidates"] = tried
        if run.ok:
            s = (run.complete or {}).get("summary") or {}
            self.logger.info(
                "stage %s: ok in %d ms (created %s, updated %s, unchanged %s, deleted %s, failed %s)",
                stage,
                elapsed,
                *(s.get(k, 0) for k in wire.SUMMARY_COUNTS),
            )
        return run, entry, resolved

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

    def _stage_entry(self, run: StageRun, elapsed_ms: int) -> dict[str, Any]:
        entry = self._stage_result(run, elapsed_ms)
        failed = failed_objects((run.complete or {}).get("errors"))
        if failed:
            entry["failed_objects"] = failed
        return entry

    def _stage_result(self, run: StageRun, elapsed_ms: int) -> dict[str, Any]:
        if run.ok:
            complete = run.complete or {}
            return {
                "stage": run.stage,
                "ok": True,
                "status": 200,
                "duration_ms": elapsed_ms,
                "backend_duration_ms": complete.get("duration_ms"),
                "summary": complete.get("summary"),
                "run_id": complete.get("run_id"),
            }
        payload = dict(run.failure_payload or {})
        payload["duration_ms"] = elapsed_ms
        if run.advisory:
            payload["advisory"] = run.advisory
        return payload

    def _recheck_key(self, resolved: ResolvedBackend, entry: dict[str, Any]) -> None:
        """SPEC 5.2.10: after a 401 the stored key is re-checked read-only; nothing is substituted."""
        target: CanonicalTarget = backend_target(resolved.row)
        outcome = recheck_stored_key(resolved.transport, target, resolved.context.api_key)
        entry["key_recheck"] = {"ok": outcome.ok, "status": outcome.status, "error": outcome.error}
        if outcome.ok:
            self.logger.warning("the backend accepts the stored key again on a read-only re-check")
        else:
            self.logger.error("read-only re-check of the stored backend key failed: %s", outcome.error)


def failed_objects(problems: object) -> list[dict[str, Any]]:
    """The objects a stage's `complete` frame names as failed (already redacted), for the sync-run page."""
    if not isinstance(problems, list):
        return []
    rows = [p for p in problems if isinstance(p, Mapping) and p.get("object")]
    return [
        {
            "object": str(p["object"])[:200],
            "status": p.get("status"),
            "detail": str(p.get("detail") or "")[:500],
            "endpoint_id": p.get("endpoint_id"),
        }
        for p in rows[:FAILED_OBJECTS_LIMIT]
    ]


def run_sync_job(job: Job, logger: logging.Logger, block: Mapping[str, Any]) -> None:
    """Entry point for `SyncJob.run()`."""
    SyncRun(job, logger, block).run()


__all__ = ["STAGE_ROUTES", "ScopeError", "SyncJobFailed", "run_sync_job", "selected_stages"]
