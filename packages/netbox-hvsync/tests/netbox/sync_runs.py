"""Sync-run job rows for the sync-run page and list tests: a core Job, a realistic finished sync block
(with a planted secret the pages must never show) and a run's page URL."""

from __future__ import annotations

import uuid

PLANTED = "plantedSECRET-" + uuid.uuid4().hex


def make_job(status="completed", data=None, name="hvsync sync", user=None, **fields):
    from core.models import Job

    return Job.objects.create(
        name=name, status=status, data=data, job_id=uuid.uuid4(), queue_name="default", user=user, **fields
    )


def finished_block() -> dict:
    """A realistic finished block: two endpoints, one stage split per endpoint, one failed object."""
    return {
        "sync": {
            "run_id": "r-1",
            "mode": "staged",
            "sync_types": ["all"],
            "endpoints": {
                "7": {"name": "pve-alpha", "backend_id": 3},
                "8": {"name": "pve-beta", "backend_id": 4},
            },
            "preflight": {
                "duration_ms": 120,
                "inventory_pushes": {"2": {"ok": True, "status": 200}},
                "hv_pushes": {"7": {"ok": True, "status": 200, "backend_id": 3}},
                "skipped_hv": {},
                # a credential-like key the renderer must never show, even if it got stored
                "api_key": PLANTED,
            },
            "reconciliation": {
                "ok": False,
                "duration_ms": 80,
                "parts": {
                    "nodes": {"endpoints": {"3": {"ok": True, "items": 2}}},
                    "firewall": {"endpoints": {"4": {"ok": False, "error": "HTTP 500"}}},
                },
            },
            "stages": [
                {
                    "stage": "devices",
                    "ok": True,
                    "status": 200,
                    "duration_ms": 3000,
                    "summary": {"created": 11, "updated": 2, "unchanged": 40, "deleted": 0, "failed": 0},
                },
                {
                    "stage": "storage",
                    "ok": False,
                    "status": 502,
                    "failure_kind": "application",
                    "error": "stage storage: 1 object failed",
                    "duration_ms": 1000,
                    "summary": {"created": 0, "updated": 1, "unchanged": 9, "deleted": 3, "failed": 1},
                    "hv_endpoints": [8],
                    "failed_objects": [
                        {"object": "local-lvm@pve2", "status": 400, "detail": "Authorization: [redacted]"}
                    ],
                },
            ],
            "runtime": {
                "total_ms": 4500,
                "endpoints": {
                    "7": {"backend_id": 3, "stages_ms": {"devices": 2900}},
                    "8": {"backend_id": 4, "stages_ms": {"devices": 2500, "storage": 990}},
                },
            },
            "warnings": ["local reconciliation was unsuccessful for some endpoint(s): firewall"],
            "errors": [f"stage storage failed; token {PLANTED}"],
            "skipped_stages": ["vm-disks"],
        }
    }


def run_url(job) -> str:
    return f"/plugins/hvsync/sync-runs/{job.pk}/"
