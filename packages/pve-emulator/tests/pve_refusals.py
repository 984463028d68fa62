"""Proxmox's own HTTP 500 refusals of guest lifecycle calls (a `die` in qemu-server / pve-container),
of the guest agent and of the time series (``AGENT_REFUSALS``).

They are answers, not emulator crashes: the 5xx checks (walk, schemathesis) accept them by operation and
exact text pattern; anything else at 5xx still fails.
"""

from __future__ import annotations

import re

GUEST = r"/nodes/\{node\}/(qemu|lxc)/\{vmid\}"
_LOCK = r"(VM|CT) is locked \([a-z-]+\)"
_DIGEST = (
    r"checksum mismatch \(file change by other user\?\)"
    r"|detected modified configuration - file changed by other user\? Try again\."
)

#: (method and path-template pattern, message pattern), both matched in full
LIFECYCLE_REFUSALS: list[tuple[str, str]] = [
    (rf"(POST|PUT|DELETE) {GUEST}(/.*)?", _LOCK),
    (rf"(POST|PUT) {GUEST}/config", _DIGEST),
    (
        rf"POST {GUEST}/template",
        r"unable to create template, because (VM|CT) contains snapshots"
        r"|you can't convert a template to a template"
        r"|you can't convert a VM to template if VM is running"
        r"|you can't convert a CT to template if the CT is running",
    ),
    (rf"POST {GUEST}/snapshot", r"you can't take a snapshot if it's a template"),
    (
        rf"POST {GUEST}/migrate",
        r"can't migrate running VM without --online"
        r"|can't migrate running container without --online or --restart",
    ),
    (
        rf"POST {GUEST}/clone",
        r"parameter '(storage|format)' not allowed for linked clones"
        r"|Full clone of a running container is only possible from a snapshot"
        r"|snapshot '[^']+' does not exist"
        r"|can't clone (VM|CT) to node '[^']+' \((VM|CT) uses local storage\)"
        r"|Linked clone feature is not supported for( a snapshot of)? '[^']+' \([a-z0-9]+\)"
        r"|Linked clone feature for '[^']+' is not available",
    ),
    (
        rf"DELETE {GUEST}",
        r"base volume '[^']+' is still in use by linked cloned"
        r"|There is a replication job '[0-9]+-[0-9]+' for guest '[0-9]+' - Please remove that first\.",
    ),
]


#: PVE::QemuServer::Agent and QMPClient: an agent that cannot be asked, or the agent's own error
AGENT_REFUSALS: list[tuple[str, str]] = [
    (
        r"(GET|POST) /nodes/\{node\}/qemu/\{vmid\}/agent(/.*)?",
        r"No QEMU guest agent configured|VM [0-9]+ is not running|QEMU guest agent is not running"
        r"|VM [0-9]+ qga command 'guest-[a-z-]+' failed - .+|command or input-data \(or both\) required",
    ),
    # PVE::RRD: an object without an RRD file, a data source the file does not have, a third line to draw
    (
        r"GET /nodes/\{node\}(/(qemu|lxc)/\{vmid\}|/storage/\{storage\})?/rrd(data)?",
        r"RRD error: .+|fixme: no color definition",
    ),
]
LIFECYCLE_REFUSALS += AGENT_REFUSALS

#: pve-firewall's plain `die`s (PVE::API2::Firewall::*): a stale digest, a position or object that is not
#: there, a group or ipset that is not empty, an ipset entry naming a missing alias, IPv4 beside IPv6
FIREWALL = r"/(cluster|nodes/\{node\}(/(qemu|lxc)/\{vmid\})?)/firewall/.+"
FIREWALL_REFUSALS: list[tuple[str, str]] = [
    (
        rf"(GET|POST|PUT|DELETE) {FIREWALL}",
        _DIGEST.split("|")[1] + r"|no rule at position [0-9]+|no such security group '.*'"
        r"|Security group '.*' is not empty|no such IPSet '.*'|IPSet '.*' is not empty|no such alias '.*'"
        r"|detected mixed ipv4/ipv6 addresses in rule",
    ),
    # AccessControl.pm change_password: check_user_exist's and the confirming login's plain `die`s
    (r"PUT /access/password", r"no such user \('.*'\)|invalid credentials"),
    # pve-manager Pool.pm: the pool index asked for one pool that is not there
    (r"GET /pools", r"pool '.*' does not exist"),
]
LIFECYCLE_REFUSALS += FIREWALL_REFUSALS


def is_lifecycle_refusal(operation: str, status: int, message: str | None) -> bool:
    """Whether a 5xx answer to ``operation`` ("METHOD /path/{template}") is one of Proxmox's refusals."""
    if status != 500 or message is None:
        return False
    text = message.rstrip("\n")
    return any(re.fullmatch(op, operation) and re.fullmatch(msg, text) for op, msg in LIFECYCLE_REFUSALS)
