"""The hvsync backend as a sync job sees it, faked at the job's transport seam (`resolve_backend()`).

`FakeResponse` is the answer shape the job reads; `complete_frame` one stage's successful stream;
`FakeBackend` answers the local-reconciliation routes (cluster, nodes, firewall, datacenter options,
templates) and every stage stream like the real backend, for backend id `BACKEND_ID`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

BACKEND_ID = 7
FIREWALL = {
    "options": {"enable": 1, "policy_in": "DROP", "policy_out": "ACCEPT"},
    "groups": [
        {"group": "web", "rules": [{"pos": 0}, {"pos": 1}]},
        {"group": "mgmt", "rules": [{"pos": 0}]},
    ],
    "rules": [{"pos": 0}, {"pos": 1}, {"pos": 2}],
    "aliases": [{"name": "gateway", "cidr": "10.10.0.1"}, {"name": "monitoring", "cidr": "10.10.0.50"}],
    "ipsets": [{"name": "mgmt-nets", "entries": [{"cidr": "10.10.0.0/24"}, {"cidr": "192.168.100.0/24"}]}],
}
OPTIONS = {"keyboard": "en-us", "console": "html5", "mac_prefix": "BC:24:11"}
TEMPLATES = [
    {"node": "pve1", "vmid": 900, "type": "lxc", "name": "ct-tpl", "config": {"template": 1}},
    {"node": "pve1", "vmid": 901, "type": "qemu", "name": "vm-tpl", "config": {"template": 1}},
]


@dataclass
class FakeResponse:
    status_code: int
    body: Any = None
    lines: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})

    @property
    def text(self) -> str:
        return "" if self.body is None else json.dumps(self.body)

    def iter_lines(self) -> Iterator[str]:
        return iter(self.lines)

    def close(self) -> None:
        return None


def complete_frame(stage: str, created: int = 0) -> list[str]:
    summary = {"created": created, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0}
    payload = {"stage": stage, "ok": True, "summary": summary, "duration_ms": 1, "errors": [], "error": None}
    return ["event: complete", "id: 1", "data: " + json.dumps(payload), ""]


class FakeBackend:
    """Answers the reconciliation routes like the real backend; `answers` overrides one route."""

    def __init__(self, hv_row: dict[str, Any]) -> None:
        from netbox_hvsync.sync.runner import STAGE_ROUTES

        self.stage_of = {path: stage for stage, path in STAGE_ROUTES.items()}
        self.hv_row = hv_row
        self.data: dict[str, Any] = {
            "/hv/cluster/status": [{"type": "cluster", "name": "alpha"}, {"type": "node", "name": "pve1"}],
            "/hv/nodes/": [{"node": "pve1"}],
            "/hv/cluster/firewall": FIREWALL,
            "/hv/cluster/options": OPTIONS,
            "/hv/templates": TEMPLATES,
        }
        self.answers: dict[str, Any] = {}
        self.calls: list[tuple[str, dict[str, list[str]]]] = []

    def request(self, method: str, url: str, **_: Any) -> FakeResponse:
        from netbox_hvsync.rules.transport import TransportError

        parts = urlsplit(url)
        path = parts.path
        if method == "GET" and path == "/hv/endpoints":
            return FakeResponse(200, [self.hv_row])
        if method == "GET" and path in self.data:
            self.calls.append((path, parse_qs(parts.query)))
            answer = self.answers.get(path)
            if isinstance(answer, Exception):
                raise answer if isinstance(answer, TransportError) else TransportError(str(answer))
            if answer is not None:
                return answer
            entry = {"endpoint_id": BACKEND_ID, "endpoint_name": "pve-a", "ok": True, "data": self.data[path]}
            return FakeResponse(200, {"endpoints": [{**entry, "error": None}]})
        return FakeResponse(404, {"detail": f"not faked: {method} {path}"})

    def open_stream(self, url: str, *, headers: Any, params: dict[str, str]) -> FakeResponse:
        return FakeResponse(200, lines=complete_frame(self.stage_of[urlsplit(url).path]), headers={})

    def close(self) -> None:
        return None
