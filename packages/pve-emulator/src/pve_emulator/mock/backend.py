"""MockBackend: the mock-mode implementation the HTTP layer talks to (moto-style, no HTTP in here)."""

from __future__ import annotations

import hmac
import threading
from typing import Any

from pve_emulator.clock import Clock
from pve_emulator.errors import ApiError
from pve_emulator.identity import Identity, expired
from pve_emulator.mock import (  # noqa: F401  (register handlers)
    access,
    cluster,
    consoles,
    firewall,
    guests,
    network,
    replication_api,
    rrd,
    storage,
    subscription,
)
from pve_emulator.mock.generic import GenericHandler
from pve_emulator.mock.registry import HANDLERS, Call
from pve_emulator.mock.scenarios import build
from pve_emulator.mock.state import ClusterState
from pve_emulator.schema import ApiSchema, Operation


class MockBackend:
    def __init__(self, schema: ApiSchema, state: ClusterState, clock: Clock | None = None) -> None:
        self.schema = schema
        self.state = state
        self.state.release = schema.release  # what /version reports: the release being served
        self.clock = clock or Clock()  # credential lifetimes; tests move it (see pve_emulator.clock)
        self._generic = GenericHandler(schema)
        self._lock = threading.Lock()
        self.handlers = {key: func for key, func in HANDLERS.items() if key in schema.by_key}

    @classmethod
    def from_scenario(
        cls,
        schema: ApiSchema,
        scenario: str,
        *,
        vms: int | None = None,
        nodes: int | None = None,
        user: str,
        password: str,
        token_id: str,
        token_secret: str,
    ) -> MockBackend:
        return cls(
            schema,
            build(
                scenario,
                vms=vms,
                nodes=nodes,
                user=user,
                password=password,
                token_id=token_id,
                token_secret=token_secret,
            ),
        )

    # -- credentials ------------------------------------------------------------------------------

    def user_enabled(self, userid: str) -> bool:
        """PVE's ``check_user_enabled``: the user exists, is enabled and its ``expire`` has not passed."""
        user = self.state.users.get(userid)
        return user is not None and bool(user.enable) and not expired(user.expire, self.clock.now())

    def check_password(self, userid: str, password: str) -> bool:
        user = self.state.users.get(userid)
        if not self.user_enabled(userid) or user is None or user.password is None:
            return False
        return hmac.compare_digest(user.password.encode(), password.encode())

    def check_token(self, userid: str, full_tokenid: str, secret: str) -> bool:
        """PVE's ``verify_token``: owner enabled and unexpired, token present and unexpired, secret right."""
        if not self.user_enabled(userid):
            return False
        token = self.state.users[userid].tokens.get(full_tokenid.split("!", 1)[1])
        if token is None or expired(token.expire, self.clock.now()):
            return False
        return hmac.compare_digest(token.secret.encode(), secret.encode())

    def allowed(self, identity: Identity, op: Operation, params: dict[str, Any]) -> bool:
        return access.check_allowed(self.state, identity, op, params)

    # -- operations -------------------------------------------------------------------------------

    def handle(self, op: Operation, params: dict[str, Any], identity: Identity) -> Any:
        """Run one operation on the model; handlers raise ApiError for client-visible failures."""
        handler = self.handlers.get(op.key, self._generic)
        with self._lock:
            refuse_offline_node(self.state, op, params)
            return handler(Call(op=op, params=params, identity=identity, state=self.state, clock=self.clock))


#: Calls under /nodes/{node} that the node answers itself: pveproxy forwards them to it, and when the node
#: is down (`NodeRecord.online` false) the forward fails with HTTP 595, as on a real cluster.
NODE_PREFIX = "/nodes/{node}/"


def refuse_offline_node(state: ClusterState, op: Operation, params: dict[str, Any]) -> None:
    if not op.path.startswith(NODE_PREFIX):
        return
    node = state.nodes.get(str(params.get("node") or ""))
    if node is not None and not node.online:
        raise ApiError(595, f"no route to host (node '{node.name}' is offline)")
