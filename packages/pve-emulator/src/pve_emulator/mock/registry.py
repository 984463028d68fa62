"""Hand-modelled operations register here by method and path template (as written in the schema)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pve_emulator.clock import Clock
from pve_emulator.identity import Identity
from pve_emulator.mock.state import ClusterState
from pve_emulator.schema import Operation


@dataclass(slots=True)
class Call:
    """One request as a handler sees it: validated parameters (path variables included), and the
    emulator's clock for what is judged by time (console tickets, time series, the guest agent's)."""

    op: Operation
    params: dict[str, Any]
    identity: Identity
    state: ClusterState
    clock: Clock = field(default_factory=Clock)

    def get(self, name: str, default: Any = None) -> Any:
        return self.params.get(name, default)


Handler = Callable[[Call], Any]
HANDLERS: dict[str, Handler] = {}


def route(method: str, path: str) -> Callable[[Handler], Handler]:
    def register(func: Handler) -> Handler:
        key = f"{method} {path}"
        if key in HANDLERS:
            raise RuntimeError(f"two handlers for {key}")
        HANDLERS[key] = func
        return func

    return register
