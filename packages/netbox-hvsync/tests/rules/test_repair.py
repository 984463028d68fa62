"""SPEC 4.6 "Plugin UI route for repair", 5.3 and 7.3 "Repair: a rejected reconcile is a warning; missing
permission, failed queueing or a running repair is a hard stop." """

from netbox_hvsync.rules.repair import REPAIR_PERMISSION, bootstrap_badge, run_repair


def test_badge_reads_ok_false_as_a_problem_and_skipped_as_skipped() -> None:
    """SPEC 4.3: "a real problem is HTTP 200 with ok false; payload may carry skipped true with reason equal
    to no_inventory_session"."""
    assert bootstrap_badge(200, {"ok": True}).state == "ok"
    problem = bootstrap_badge(200, {"ok": False, "detail": "custom field hv_vmid missing"})
    assert (problem.state, problem.detail) == ("problem", "custom field hv_vmid missing")
    skipped = bootstrap_badge(200, {"ok": True, "skipped": True, "reason": "no_inventory_session"})
    assert skipped.state == "skipped" and "no inventory endpoint" in skipped.detail
    assert bootstrap_badge(None, None).state == "unavailable"
    assert bootstrap_badge(500, {"detail": "x"}).detail == "backend answered HTTP 500"


def test_rejected_reconcile_is_a_warning_and_sync_is_queued() -> None:
    queued: list[int] = []

    def queue() -> int:
        queued.append(1)
        return 99

    outcome = run_repair(
        has_permission=True,
        repair_running=False,
        reconcile=lambda: (False, "HTTP 503"),
        queue_full_sync=queue,
    )
    assert outcome.ok and outcome.job_id == 99 and queued == [1]
    assert outcome.warnings == ["custom-field reconcile was rejected: HTTP 503"]

    def boom() -> tuple[bool, str]:
        raise ConnectionError("refused")

    assert run_repair(has_permission=True, repair_running=False, reconcile=boom, queue_full_sync=lambda: 5).ok


def test_hard_stops_call_nothing() -> None:
    calls: list[str] = []

    def reconcile() -> tuple[bool, str]:
        calls.append("reconcile")
        return True, ""

    def queue() -> int:
        calls.append("queue")
        return 1

    denied = run_repair(
        has_permission=False, repair_running=False, reconcile=reconcile, queue_full_sync=queue
    )
    assert not denied.ok and denied.error == (
        "repair needs the core.add_job and netbox_hvsync.view_hvendpoint and "
        "netbox_hvsync.view_backendendpoint permissions"
    )
    assert REPAIR_PERMISSION == "core.add_job"
    running = run_repair(has_permission=True, repair_running=True, reconcile=reconcile, queue_full_sync=queue)
    assert not running.ok and running.error == "a repair sync is already running"
    assert calls == []

    def failing_queue() -> int:
        raise RuntimeError("redis down")

    failed = run_repair(
        has_permission=True, repair_running=False, reconcile=reconcile, queue_full_sync=failing_queue
    )
    assert not failed.ok and failed.error == "could not queue the full sync: RuntimeError: redis down"


def test_a_repair_found_running_under_the_queue_lock_is_the_same_hard_stop() -> None:
    from netbox_hvsync.rules.repair import RepairAlreadyRunning

    def queue() -> int:
        raise RepairAlreadyRunning()

    outcome = run_repair(
        has_permission=True,
        repair_running=False,
        reconcile=lambda: (False, "HTTP 409"),
        queue_full_sync=queue,
    )
    assert not outcome.ok and outcome.error == "a repair sync is already running"
    assert outcome.warnings == ["custom-field reconcile was rejected: HTTP 409"]
