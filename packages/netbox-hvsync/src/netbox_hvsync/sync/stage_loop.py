"""The stage loop of a staged sync job (SPEC 4.5, 5.2.10): one stream a stage, in pipeline order.

The rules decide the calls of each stage (`rules.scope.stage_calls`), the attempts and retries of one
stream (`rules.stage_runner`), when the loop stops and the job's composed message. This loop runs them on
the first backend address that answers, records each stage's entry, per-endpoint time and failed objects
in the sync block, and re-checks the stored key read-only after a 401 (a successful re-check retries the
stage in a new failure-selection epoch: `rules.stage_runner.run_stage_rebinding`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from netbox_hvsync import wire
from netbox_hvsync.backend.failover import run_on_candidates
from netbox_hvsync.backend.resolution import ResolvedBackend, backend_target
from netbox_hvsync.choices import SYNC_STAGES, SYNC_TYPE_ALL
from netbox_hvsync.rules.adoption import AdoptionOutcome, recheck_stored_key
from netbox_hvsync.rules.failures import APPLICATION
from netbox_hvsync.rules.preflight import append_hint
from netbox_hvsync.rules.scope import StageCall, StageRecord, SyncModes, stage_calls, staged_job_failure
from netbox_hvsync.rules.stage_runner import StageRun, run_stage_rebinding
from netbox_hvsync.rules.transport import BackendContext
from netbox_hvsync.rules.urls import CanonicalTarget
from netbox_hvsync.sync.state import RunState, StepTimer

#: Backend stream route of each stage, in pipeline order (wire data shared with the backend).
STAGE_ROUTES: Mapping[str, str] = wire.STAGE_ROUTES
#: How many `object` problem frames of one stage are copied into the job log.
STEP_PROBLEM_LOG_LIMIT = 10
#: How many failed objects of one stage's `complete` frame are kept in its job-data entry.
FAILED_OBJECTS_LIMIT = 50


def selected_stages(sync_types: Sequence[str] | None) -> list[str]:
    """Pipeline order is kept whatever order the types were given in; `all` or nothing selects every stage."""
    wanted = set(sync_types or [SYNC_TYPE_ALL])
    if SYNC_TYPE_ALL in wanted:
        return list(SYNC_STAGES)
    return [stage for stage in SYNC_STAGES if stage in wanted]


class StageLoop(RunState):
    """The stage-loop part of a sync run (`SyncRun` in `netbox_hvsync.sync.runner`)."""

    #: the loaded hv endpoints' sync modes, set by `run()`; an endpoint missing here has the default modes
    sync_modes: Mapping[int, SyncModes] = MappingProxyType({})

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
            return run_stage_rebinding(
                stage,
                lambda: transport.open_stream(url, headers=ctx.auth_headers(), params=dict(params)),
                recheck=lambda: self._recheck_key(resolved, ctx),
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
        if run.key_recheck is not None:
            entry["key_recheck"] = run.key_recheck
        if run.rebinds:
            entry["key_rebinds"] = run.rebinds
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

    def _recheck_key(self, resolved: ResolvedBackend, ctx: BackendContext) -> AdoptionOutcome:
        """SPEC 5.2.10: after a 401 the stored key is re-checked read-only; nothing is substituted."""
        target: CanonicalTarget = backend_target(resolved.row)
        outcome = recheck_stored_key(resolved.transport, target, ctx.api_key)
        if outcome.ok:
            self.logger.warning("the backend accepts the stored key again on a read-only re-check")
        else:
            self.logger.error("read-only re-check of the stored backend key failed: %s", outcome.error)
        return outcome


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


__all__ = ["STAGE_ROUTES", "StageLoop", "failed_objects", "selected_stages"]
