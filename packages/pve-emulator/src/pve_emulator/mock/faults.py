"""Faults on demand: a Proxmox cluster that misbehaves on purpose, repeatably (seeded), without HTTP.

One :class:`Faults` holds what is wrong right now. Part of it is state the model already knows how to show
(a node that is down, a guest's ``lock``), and is applied to the :class:`ClusterState`; the rest is how
answers change (quorum, an unavailable storage, a failing task, task durations), applied by ``refuse``
before an operation runs and by ``shape`` to its result. What happens on the wire (latency, dropped
connections, the connect delay of an offline node) is only decided here (``delay``, ``drop``) and done by
the HTTP layer (``pve_emulator.fault_gate``). The same settings come from the CLI (``--fault``), the
control API (``/_emulator/faults``) and the pytest marker (``pve_faults``), all as :meth:`Faults.update`.

Texts are Proxmox's: ``cluster not ready - no quorum?`` (PVE::Cluster::check_cfs_quorum), ``storage 'x'
is not online`` (PVE::Storage::activate_storage), ``VM is locked (backup)`` (check_lock), and a node
pveproxy cannot reach answers HTTP 595 ``no route to host``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from pve_emulator.errors import ApiError, FieldError, ParameterError
from pve_emulator.mock.state import ClusterState

__all__ = ["FAULT_KEYS", "LOCK_KINDS", "Faults", "LatencyRule", "parse_cli_fault"]

#: qemu-server's and pve-container's ``lock`` values
LOCK_KINDS = (
    "backup",
    "clone",
    "create",
    "migrate",
    "rollback",
    "snapshot",
    "snapshot-delete",
    "suspending",
    "suspended",
)
NO_QUORUM = "cluster not ready - no quorum?"
#: writes that still work without quorum: a login only reads the user database
QUORUM_FREE = {"POST /access/ticket"}
STORAGE_PREFIX = "/nodes/{node}/storage/{storage}/"
#: what an unavailable storage still answers (with ``active: 0``): its status and its time series
STORAGE_STILL_ANSWERS = {"status", "rrd", "rrddata"}
#: every key ``update`` takes (the control API's JSON, the marker's keywords, ``--fault`` with ``-`` for ``_``)
FAULT_KEYS = (
    "seed",
    "node_offline",
    "connect_delay",
    "no_quorum",
    "ticket_lifetime",
    "latency",
    "drop_rate",
    "locked",
    "task_error",
    "storage_unavailable",
    "time_scale",
)


@dataclass(frozen=True, slots=True)
class LatencyRule:
    """Requests whose API path matches ``pattern`` (``*`` one path segment, ``**`` any) wait ``seconds``
    plus up to ``jitter`` more, drawn from the seeded generator."""

    pattern: str
    seconds: float
    jitter: float = 0.0
    regex: re.Pattern[str] = field(compare=False, repr=False, default=re.compile(""))

    @classmethod
    def make(cls, pattern: str, seconds: float, jitter: float = 0.0) -> LatencyRule:
        text = pattern.removeprefix("/api2/json")
        body = "".join(
            ".*" if part == "**" else "[^/]+" if part == "*" else re.escape(part)
            for part in re.split(r"(\*\*|\*)", text)
        )
        return cls(pattern, seconds, jitter, re.compile(f"^{body}/?$"))

    def view(self) -> Any:
        return [self.seconds, self.jitter] if self.jitter else self.seconds


def _bad(field_name: str, message: str) -> ParameterError:
    return ParameterError([FieldError(field_name, message)])


def _number(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _bad(name, "must be a number")
    try:
        number = float(value)
    except ValueError:
        raise _bad(name, "must be a number") from None
    if not low <= number <= high:
        raise _bad(name, f"must be between {low:g} and {high:g}")
    return number


def _names(name: str, value: Any) -> set[str]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple | set) or not all(isinstance(i, str) and i for i in items):
        raise _bad(name, "must be a list of names")
    return {i.strip() for i in items if i.strip()}


def _mapping(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(name, "must be an object")
    return {str(k): v for k, v in value.items()}


class Faults:
    """What is wrong with the emulated cluster now; ``update`` changes it, ``clear`` ends every fault."""

    def __init__(self, state: ClusterState, seed: int = 0) -> None:
        self.state = state
        self.seed = seed
        self.rng = random.Random(seed)
        self.offline: set[str] = set()
        self.connect_delay = 0.0
        self.no_quorum = False
        self.ticket_lifetime: float | None = None
        self.latency: list[LatencyRule] = []
        self.drop_rate = 0.0
        self.locked: dict[int, str] = {}
        self.task_error: dict[str, str] = {}
        self.storage_unavailable: set[str] = set()
        self.time_scale = 1.0

    # -- settings ---------------------------------------------------------------------------------

    def view(self) -> dict[str, Any]:
        """The settings in the shape ``update`` takes (``GET /_emulator/faults``)."""
        return {
            "seed": self.seed,
            "node_offline": sorted(self.offline),
            "connect_delay": self.connect_delay,
            "no_quorum": self.no_quorum,
            "ticket_lifetime": self.ticket_lifetime,
            "latency": {rule.pattern: rule.view() for rule in self.latency},
            "drop_rate": self.drop_rate,
            "locked": {str(vmid): lock for vmid, lock in sorted(self.locked.items())},
            "task_error": dict(self.task_error),
            "storage_unavailable": sorted(self.storage_unavailable),
            "time_scale": self.time_scale,
        }

    def update(self, settings: dict[str, Any]) -> None:
        """Set the named faults (others stay as they are). Everything is checked before anything changes,
        so a refused request (400 naming the field) leaves the faults as they were."""
        unknown = sorted(set(settings) - set(FAULT_KEYS))
        if unknown:
            raise _bad(unknown[0], f"unknown fault; known: {', '.join(FAULT_KEYS)}")
        checked = {key: getattr(self, f"_check_{key}")(value) for key, value in settings.items()}
        for key, value in checked.items():
            getattr(self, f"_set_{key}")(value)
        self.state.bump()  # cached list answers must show the change

    def clear(self) -> None:
        self.update({key: value for key, value in Faults(self.state, self.seed).view().items()})

    def _check_seed(self, value: Any) -> int:
        return int(_number("seed", value, 0, 2**63 - 1))

    def _set_seed(self, value: int) -> None:
        self.seed, self.rng = value, random.Random(value)

    def _check_node_offline(self, value: Any) -> set[str]:
        names = _names("node_offline", value)
        unknown = sorted(names - set(self.state.nodes))
        if unknown:
            raise _bad("node_offline", f"no node '{unknown[0]}'")
        return names

    def _set_node_offline(self, names: set[str]) -> None:
        for name in self.offline - names:
            if name in self.state.nodes:
                self.state.set_node_online(name, True)
        for name in names - self.offline:
            self.state.set_node_online(name, False)
        self.offline = names

    def _check_connect_delay(self, value: Any) -> float:
        return _number("connect_delay", value, 0, 60)

    def _set_connect_delay(self, value: float) -> None:
        self.connect_delay = value

    def _check_no_quorum(self, value: Any) -> bool:
        if isinstance(value, str) and value.lower() in ("0", "1", "true", "false", "yes", "no"):
            return value.lower() in ("1", "true", "yes")
        if not isinstance(value, bool | int):
            raise _bad("no_quorum", "must be a boolean")
        return bool(value)

    def _set_no_quorum(self, value: bool) -> None:
        self.no_quorum = value

    def _check_ticket_lifetime(self, value: Any) -> float | None:
        return None if value is None else _number("ticket_lifetime", value, 1, 7200)

    def _set_ticket_lifetime(self, value: float | None) -> None:
        self.ticket_lifetime = value

    def _check_latency(self, value: Any) -> list[LatencyRule]:
        rules = []
        for pattern, spec in _mapping("latency", value).items():
            if not pattern.startswith("/"):
                raise _bad("latency", f"pattern {pattern!r} must start with /")
            pair = spec if isinstance(spec, list | tuple) else [spec]
            if len(pair) not in (1, 2):
                raise _bad("latency", "each pattern takes seconds or [seconds, jitter]")
            seconds = _number("latency", pair[0], 0, 60)
            jitter = _number("latency", pair[1], 0, 60) if len(pair) == 2 else 0.0
            rules.append(LatencyRule.make(pattern, seconds, jitter))
        return rules

    def _set_latency(self, rules: list[LatencyRule]) -> None:
        self.latency = rules

    def _check_drop_rate(self, value: Any) -> float:
        return _number("drop_rate", value, 0, 1)

    def _set_drop_rate(self, value: float) -> None:
        self.drop_rate = value

    def _check_locked(self, value: Any) -> dict[int, str]:
        out = {}
        for vmid, lock in _mapping("locked", value).items():
            if not vmid.isdigit() or int(vmid) not in self.state.guests:
                raise _bad("locked", f"no guest {vmid}")
            if lock not in LOCK_KINDS:
                raise _bad("locked", f"lock must be one of {', '.join(LOCK_KINDS)}")
            out[int(vmid)] = str(lock)
        return out

    def _set_locked(self, locks: dict[int, str]) -> None:
        for vmid, lock in self.locked.items():
            guest = self.state.guests.get(vmid)
            if guest is not None and guest.lock == lock and guest.lock_task is None and vmid not in locks:
                guest.lock = None  # only the lock this fault set: a lock the guest took since stays
        for vmid, lock in locks.items():
            guest = self.state.guests[vmid]
            guest.lock, guest.lock_task = lock, None
        self.locked = locks

    def _check_task_error(self, value: Any) -> dict[str, str]:
        out = {}
        for kind, message in _mapping("task_error", value).items():
            if not isinstance(message, str) or not message or "\n" in message:
                raise _bad("task_error", f"the message for {kind!r} must be one line of text")
            out[kind] = message
        return out

    def _set_task_error(self, value: dict[str, str]) -> None:
        self.task_error = value

    def _check_storage_unavailable(self, value: Any) -> set[str]:
        names = _names("storage_unavailable", value)
        unknown = sorted(names - set(self.state.storages))
        if unknown:
            raise _bad("storage_unavailable", f"no storage '{unknown[0]}'")
        return names

    def _set_storage_unavailable(self, value: set[str]) -> None:
        self.storage_unavailable = value

    def _check_time_scale(self, value: Any) -> float:
        return _number("time_scale", value, 0, 1000)

    def _set_time_scale(self, value: float) -> None:
        self.time_scale = value

    # -- the wire (done by pve_emulator.fault_gate) ------------------------------------------------

    def drop(self) -> bool:
        """Whether to close this request's connection without an answer (at ``drop_rate``)."""
        return self.drop_rate > 0 and self.rng.random() < self.drop_rate

    def delay(self, api_path: str) -> float:
        """Seconds to hold a request for ``api_path`` (``/nodes/pve1/qemu``, no ``/api2/json``) before
        it is handled: the first matching latency rule, plus the connect delay of an offline node."""
        seconds = 0.0
        for rule in self.latency:
            if rule.regex.match(api_path):
                seconds = rule.seconds + (self.rng.uniform(0, rule.jitter) if rule.jitter else 0.0)
                break
        if self.offline and self.connect_delay:
            parts = api_path.split("/", 3)
            if len(parts) > 3 and parts[1] == "nodes" and parts[2] in self.offline:
                seconds += self.connect_delay
        return seconds

    # -- answers ------------------------------------------------------------------------------------

    def refuse(self, op_key: str, params: dict[str, Any]) -> None:
        """Fail an operation before it runs, as Proxmox fails it under the current faults."""
        method = op_key.split(" ", 1)[0]
        if self.no_quorum and method != "GET" and op_key not in QUORUM_FREE:
            raise ApiError(500, NO_QUORUM)
        storage = params.get("storage")
        if storage in self.storage_unavailable and op_key.split(" ", 1)[1].startswith(STORAGE_PREFIX):
            rest = op_key.split(" ", 1)[1][len(STORAGE_PREFIX) :]
            if rest.split("/", 1)[0] not in STORAGE_STILL_ANSWERS:
                raise ApiError(500, f"storage '{storage}' is not online")

    def shape(self, op_key: str, params: dict[str, Any], result: Any) -> Any:
        """Change an operation's result for the current faults (a new task's outcome and duration, the
        quorum flag, an unavailable storage's status)."""
        if isinstance(result, str) and result.startswith("UPID:"):
            self._shape_task(result)
        elif op_key == "GET /cluster/status" and self.no_quorum and isinstance(result, list):
            for entry in result:
                if entry.get("type") == "cluster":
                    entry["quorate"] = 0
        elif self.storage_unavailable:
            self._shape_storage(op_key, params, result)
        return result

    def _shape_task(self, upid: str) -> None:
        task = self.state.tasks.get(upid)
        if task is None:
            return
        if self.time_scale != 1.0:
            task.duration *= self.time_scale
        message = self.task_error.get(task.type, self.task_error.get("*"))
        if message is not None:
            task.exitstatus = message
            task.log = [*task.log[:-1], f"TASK ERROR: {message}"]
        self.state.bump()

    def _shape_storage(self, op_key: str, params: dict[str, Any], result: Any) -> None:
        down = self.storage_unavailable
        if op_key == "GET /nodes/{node}/storage" and isinstance(result, list):
            for entry in result:
                if entry.get("storage") in down:
                    entry.update({"active": 0, "total": 0, "used": 0, "avail": 0})
        elif op_key == "GET /nodes/{node}/storage/{storage}/status" and params.get("storage") in down:
            result.update({"active": 0, "total": 0, "used": 0, "avail": 0})
        elif op_key == "GET /cluster/resources" and isinstance(result, list):
            for entry in result:
                if entry.get("type") == "storage" and entry.get("storage") in down:
                    # pvestatd broadcasts no figures for a storage it cannot activate
                    entry["status"] = "unknown"
                    entry.pop("disk", None)
                    entry.pop("maxdisk", None)


def parse_cli_fault(text: str) -> tuple[str, Any]:
    """One ``--fault`` option, ``name=value`` (``name`` with ``-`` or ``_``), as an ``update`` pair:

    ``node-offline=pve2[,pve3]``, ``connect-delay=0.5``, ``no-quorum`` (or ``=1``), ``ticket-lifetime=30``,
    ``latency=/nodes/*/qemu/*/config:2.0[~0.5]``, ``drop-rate=0.05``, ``locked=101:backup``,
    ``task-error=vzdump:storage full`` (``*`` for every task type), ``storage-unavailable=nfs``,
    ``time-scale=0.1``, ``seed=7``. Repeated ``latency``/``locked``/``task-error`` options add up."""
    name, sep, value = text.partition("=")
    key = name.strip().replace("-", "_")
    if key not in FAULT_KEYS:
        raise ValueError(
            f"unknown fault {name!r}; known: {', '.join(k.replace('_', '-') for k in FAULT_KEYS)}"
        )
    if key == "no_quorum":
        return key, value if sep else True
    if not sep:
        raise ValueError(f"--fault {name} needs a value ({name}=...)")
    if key == "latency":
        pattern, colon, spec = value.rpartition(":")
        if not colon:
            raise ValueError("latency takes PATTERN:SECONDS[~JITTER]")
        seconds, tilde, jitter = spec.partition("~")
        return key, {pattern: [seconds, jitter] if tilde else seconds}
    if key in ("locked", "task_error"):
        first, colon, rest = value.partition(":")
        if not colon:
            raise ValueError(f"{name} takes {'VMID:LOCK' if key == 'locked' else 'TASKTYPE:MESSAGE'}")
        return key, {first: rest}
    return key, value


def merge_cli_faults(texts: list[str]) -> dict[str, Any]:
    """Every ``--fault`` option as one ``update`` (mapping faults add up, lists join)."""
    out: dict[str, Any] = {}
    for text in texts:
        key, value = parse_cli_fault(text)
        if isinstance(value, dict):
            out.setdefault(key, {}).update(value)
        elif key in ("node_offline", "storage_unavailable") and key in out:
            out[key] = f"{out[key]},{value}"
        else:
            out[key] = value
    return out
