"""Consoles: ``vncshell``/``termproxy`` of a node, ``vncproxy``/``termproxy`` of a VM or container, and
the ``vncwebsocket`` calls that check their tickets (pve-manager's ``PVE::API2::Nodes``, qemu-server's
and pve-container's API).

A console call starts a worker task and answers what the client connects with: ``user`` (who asked,
a token's id for a token), ``ticket`` (a ``PVEVNC`` ticket bound to that user, the object's path and the
port), ``port`` (5900-5999), ``upid``; the VNC calls add ``cert`` (the cluster CA's PEM) and, when a VNC
password is made, ``password``, prefixed to the ticket as ``<password>:PVEVNC:...`` as Proxmox still
does. ``vncwebsocket`` accepts a ticket for 40 seconds after it was made (20 of clock skew tolerated,
``PVE::Ticket::verify_rsa_ticket``), else 401 "permission denied - invalid PVEVNC ticket"; the HTTP
layer (``pve_emulator.front``) upgrades an accepted call to a websocket and closes it normally.
Tickets are signed with a per-process secret, like the login tickets (``pve_emulator.auth``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from typing import Any

from pve_emulator.errors import Forbidden, Unauthorized
from pve_emulator.mock.guests.common import guest_of, node_of
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import GuestKind

_SECRET = secrets.token_bytes(32)
_TICKET = re.compile(r"^(?:.{8}:)?(PVEVNC:([A-Z0-9]{8}))::(\S+)$")
MIN_AGE, MAX_AGE = -20, 40  # verify_vnc_ticket's window, in seconds
FIRST_PORT, PORTS = 5900, 100  # PVE::Tools::next_vnc_port: 5900 up to 5999


def _sign(plain: str, user: str, path: str, port: int) -> str:
    mac = hmac.new(_SECRET, f"{plain}:{user}:{path}:{port}".encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def vnc_ticket(user: str, path: str, port: int, now: float) -> str:
    """``assemble_vnc_ticket``: ``PVEVNC:<hex time>::<signature>`` over user, path and port."""
    plain = f"PVEVNC:{int(now):08X}"
    return f"{plain}::{_sign(plain, user, path, port)}"


def verify_vnc_ticket(ticket: str, user: str, path: str, port: int, now: float) -> None:
    """``verify_vnc_ticket`` (the ``<password>:`` prefix dropped first): 401 unless genuine and fresh."""
    found = _TICKET.match(ticket)
    if found is not None:
        plain, stamp, signature = found.groups()
        genuine = hmac.compare_digest(_sign(plain, user, path, port), signature)
        if genuine and MIN_AGE < now - int(stamp, 16) < MAX_AGE:
            return
    raise Unauthorized("permission denied - invalid PVEVNC ticket")


def vnc_password() -> str:
    """``generate_vnc_password``: 8 printable characters from '!' to '`'."""
    return "".join(chr(33 + secrets.randbelow(64)) for _ in range(8))


@functools.cache
def cluster_ca() -> str:
    """The PEM of a cluster CA like ``/etc/pve/pve-root-ca.pem`` (made once per process)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from pve_emulator.tls import self_signed

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "Proxmox Virtual Environment"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, secrets.token_hex(16)),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "PVE Cluster Manager CA"),
        ]
    )
    cert = self_signed(
        name,
        key,
        valid=datetime.timedelta(days=3650),
        backdate=datetime.timedelta(days=1),
        extensions=[(x509.BasicConstraints(ca=True, path_length=None), True)],
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _console(call: Call, node: str, task: str, ident: str, path: str) -> dict[str, Any]:
    """The worker task, its port and the ticket for it: what every console call answers."""
    user = call.identity.subject
    started = call.state.add_task(
        node, task, ident, user, log=[f"starting {'termproxy' if 'term' in task else 'vnc proxy'}", "TASK OK"]
    )
    port = FIRST_PORT + int(started.upid.split(":")[2], 16) % PORTS
    return {
        "user": user,
        "ticket": vnc_ticket(user, path, port, call.clock.now()),
        "port": port,
        "upid": started.upid,
    }


def _with_password(answer: dict[str, Any], password: bool) -> dict[str, Any]:
    answer["cert"] = cluster_ca()
    if password:
        answer["password"] = vnc_password()
        answer["ticket"] = f"{answer['password']}:{answer['ticket']}"
    return answer


# -- node shell ---------------------------------------------------------------------------------------


@route("POST", "/nodes/{node}/vncshell")
def node_vncshell(call: Call) -> dict[str, Any]:
    """Only root@pam may run another command than ``login`` (``raise_perm_exc('user != root@pam')``)."""
    node = node_of(call)
    if call.get("cmd") not in (None, "login") and call.identity.userid != "root@pam":
        raise Forbidden("Permission check failed (user != root@pam)")
    answer = _console(call, node, "vncshell", "", f"/nodes/{node}")
    return _with_password(answer, bool(call.get("websocket")))


@route("POST", "/nodes/{node}/termproxy")
def node_termproxy(call: Call) -> dict[str, Any]:
    node = node_of(call)
    return _console(call, node, "vncshell", "", f"/nodes/{node}")


@route("GET", "/nodes/{node}/vncwebsocket")
def node_vncwebsocket(call: Call) -> dict[str, Any]:
    node = node_of(call)
    return _websocket(call, f"/nodes/{node}")


# -- guests -------------------------------------------------------------------------------------------


def _serial_display(call: Call) -> bool:
    """Whether the VM's display is a serial port (``vga: serial0``): its VNC console needs no password."""
    guest = guest_of(call, "qemu")
    vga = str(guest.config.get("vga", ""))
    return bool(re.match(r"^(type=)?serial\d", vga))


def guest_vncproxy(call: Call, kind: GuestKind) -> dict[str, Any]:
    """A VM's VNC makes a password unless its display is serial (then only for ``websocket`` or
    ``generate-password``); a container's only for ``websocket``."""
    guest = guest_of(call, kind)
    answer = _console(call, guest.node, "vncproxy", str(guest.vmid), f"/vms/{guest.vmid}")
    wanted = bool(call.get("websocket")) or bool(call.get("generate-password"))
    password = wanted or (kind == "qemu" and not _serial_display(call))
    return _with_password(answer, password)


def guest_termproxy(call: Call, kind: GuestKind) -> dict[str, Any]:
    guest = guest_of(call, kind)
    return _console(call, guest.node, "vncproxy", str(guest.vmid), f"/vms/{guest.vmid}")


def guest_vncwebsocket(call: Call, kind: GuestKind) -> dict[str, Any]:
    answer = _websocket(call, f"/vms/{call.params['vmid']}")
    guest_of(call, kind)  # the ticket first, then whether the guest exists (as qemu-server orders it)
    return answer


def _websocket(call: Call, path: str) -> dict[str, Any]:
    port = int(call.params["port"])
    verify_vnc_ticket(str(call.params["vncticket"]), call.identity.subject, path, port, call.clock.now())
    return {"port": str(port)}


def _bound(operation: Any, kind: GuestKind) -> Any:
    def handler(call: Call) -> Any:
        return operation(call, kind)

    return handler


for _kind in ("qemu", "lxc"):
    _base = f"/nodes/{{node}}/{_kind}/{{vmid}}"
    route("POST", f"{_base}/vncproxy")(_bound(guest_vncproxy, _kind))
    route("POST", f"{_base}/termproxy")(_bound(guest_termproxy, _kind))
    route("GET", f"{_base}/vncwebsocket")(_bound(guest_vncwebsocket, _kind))
