"""Timeouts, budgets and limits of SPEC section 8 and 4.5, in one place so glue and tests agree.

Timeouts are ceilings handed to the transport, never sleeps (SPEC 4.5: "ceilings, not delays").
"""

from typing import Final

from ..wire import API_KEY_HEADER as WIRE_API_KEY_HEADER
from ..wire.redaction import DEPTH_LIMIT

#: Inventory push timeout default (SPEC 8: 10 s).
INVENTORY_PUSH_TIMEOUT: Final[float] = 10.0
#: Hv push timeout default (SPEC 8: 15 s).
HV_PUSH_TIMEOUT: Final[float] = 15.0
#: Soft push budget of the preflight (SPEC 4.5 / 8: 600 s).
PREFLIGHT_ENDPOINT_PUSH_BUDGET: Final[float] = 600.0
#: Hard push ceiling of the preflight (SPEC 4.5 / 8: 1800 s, 25% of the default job timeout).
PREFLIGHT_ENDPOINT_PUSH_HARD_CEILING: Final[float] = 1800.0
#: The default job timeout the hard ceiling is a quarter of (SPEC 8: implied 7200 s).
DEFAULT_JOB_TIMEOUT: Final[float] = 7200.0
#: Length of a token the plugin generates for the backend (SPEC 5.1.8 / 8: 64 characters).
GENERATED_TOKEN_LENGTH: Final[int] = 64
#: Minimum accepted backend key length (SPEC 5.1.6: at least 32 characters).
MIN_BACKEND_KEY_LENGTH: Final[int] = 32
#: Longest key the plugin accepts as a candidate; anything longer is a paste error, not a key.
MAX_BACKEND_KEY_LENGTH: Final[int] = 512

#: Ceiling for GET /auth/bootstrap-status during adoption (SPEC 4.5 names it; the value is ours).
BOOTSTRAP_STATUS_TIMEOUT: Final[float] = 5.0
#: Ceiling for POST /auth/register-key during adoption (SPEC 4.5 names it; the value is ours).
REGISTER_KEY_TIMEOUT: Final[float] = 10.0
#: Ceiling for every other backend call made while adopting a key (GET /, /health, /auth/keys).
BACKEND_ENDPOINT_PUSH_TIMEOUT: Final[float] = 10.0
#: Preflight step 2 waits at most this long, in total, for GET /health to answer (SPEC: "short bounded").
HEALTH_WAIT_BUDGET: Final[float] = 10.0

#: How many failed objects a selected-objects job log names before it summarises the rest.
#: SPEC 4.5 names the constant but not its value: 10 keeps one log line per object readable
#: while a large failed batch stays a short log.
BATCH_FAILURE_DETAIL_LIMIT: Final[int] = 10

#: Longest rendering of one appended attempt line in a composed failure message (SPEC 7.3 "bounded").
ATTEMPT_LINE_LIMIT: Final[int] = 300
#: Nesting depth past which redaction stops descending (SPEC 7.3 "recursion limit"; wire data).
REDACTION_DEPTH_LIMIT: Final[int] = DEPTH_LIMIT

#: Header that carries the backend key (SPEC 5.1.1).
API_KEY_HEADER: Final[str] = WIRE_API_KEY_HEADER
#: Address substituted when the inventory endpoint has no linked IP (SPEC 2.3: "a loopback address").
LOOPBACK_SUBSTITUTE: Final[str] = "127.0.0.1"
