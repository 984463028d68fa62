"""The QEMU guest agent of a VM: every ``/nodes/{node}/qemu/{vmid}/agent/*`` command, as qemu-server
relays it (``PVE::API2::Qemu::Agent``) and qemu-guest-agent answers it.

Before any command, ``PVE::QemuServer::Agent::assert_agent_available`` decides, in this order:
no ``agent`` key in the config is "No QEMU guest agent configured", a VM that is not running is
"VM <vmid> is not running", and an agent that does not answer (``agent: 0``, so no agent socket; or a
paused VM) is "QEMU guest agent is not running", each an HTTP 500. An error of the agent itself is
QMPClient's "VM <vmid> qga command 'guest-<cmd>' failed - <desc>" with qemu-guest-agent's own text.

What the guest shows is derived from its config and scenario: interfaces from its NICs and the
addresses the scenario gave it, file systems from its disks, the OS from ``ostype``. What a caller
changes lives in ``Guest.agent`` (files written, processes started, the fsfreeze state); processes and
the freeze end with the guest's boot (a new ``started``), files stay as on a disk.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from typing import Any

from pve_emulator.errors import ApiError
from pve_emulator.mock.guests.common import disk_entries, guest_nics, guest_of, guest_usage, set_running
from pve_emulator.mock.guests.qemu import agent_enabled
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import Guest

BASE = "/nodes/{node}/qemu/{vmid}/agent"
AGENT_VERSION = "9.2.0"
#: qemu-guest-agent's ``ga_freeze_allowlist``: the only commands a frozen guest still answers
FREEZE_ALLOWED = {
    "guest-ping",
    "guest-info",
    "guest-sync",
    "guest-sync-delimited",
    "guest-fsfreeze-status",
    "guest-fsfreeze-thaw",
}
#: what ``guest-info`` lists (a Linux qemu-guest-agent 9.x; Windows lacks the memory-block commands)
QGA_COMMANDS = (
    "guest-exec",
    "guest-exec-status",
    "guest-file-close",
    "guest-file-flush",
    "guest-file-open",
    "guest-file-read",
    "guest-file-seek",
    "guest-file-write",
    "guest-fsfreeze-freeze",
    "guest-fsfreeze-freeze-list",
    "guest-fsfreeze-status",
    "guest-fsfreeze-thaw",
    "guest-fstrim",
    "guest-get-cpustats",
    "guest-get-devices",
    "guest-get-diskstats",
    "guest-get-disks",
    "guest-get-fsinfo",
    "guest-get-host-name",
    "guest-get-load",
    "guest-get-memory-block-info",
    "guest-get-memory-blocks",
    "guest-get-osinfo",
    "guest-get-time",
    "guest-get-timezone",
    "guest-get-users",
    "guest-get-vcpus",
    "guest-info",
    "guest-network-get-interfaces",
    "guest-network-get-route",
    "guest-ping",
    "guest-set-memory-blocks",
    "guest-set-time",
    "guest-set-user-password",
    "guest-set-vcpus",
    "guest-shutdown",
    "guest-ssh-add-authorized-keys",
    "guest-ssh-get-authorized-keys",
    "guest-ssh-remove-authorized-keys",
    "guest-suspend-disk",
    "guest-suspend-hybrid",
    "guest-suspend-ram",
    "guest-sync",
    "guest-sync-delimited",
)
WINDOWS_LACKS = {
    "guest-get-memory-block-info",
    "guest-get-memory-blocks",
    "guest-set-memory-blocks",
    "guest-get-cpustats",
    "guest-get-diskstats",
    "guest-get-load",
    "guest-ssh-add-authorized-keys",
    "guest-ssh-get-authorized-keys",
    "guest-ssh-remove-authorized-keys",
}
#: commands the agent answers by going away (QMPClient's ``$qga_allow_close_cmds``)
NO_ANSWER = {"guest-shutdown", "guest-suspend-disk", "guest-suspend-ram", "guest-suspend-hybrid"}
UNSUPPORTED = "this feature or command is not currently supported"
MEMORY_BLOCK = 128 * 1024**2
#: ``ostype`` -> (kernel-release, kernel-version, id/version fields) of what the guest reports
WINDOWS = {
    "win11": ("26100", "Windows 11 Pro", "Microsoft Windows 11", "11", "client"),
    "win10": ("19045", "Windows 10 Pro", "Microsoft Windows 10", "10", "client"),
    "win8": ("9600", "Windows 8.1 Pro", "Microsoft Windows 8.1", "8.1", "client"),
    "win7": ("7601", "Windows 7 Professional", "Microsoft Windows 7", "7", "client"),
    "w2k8": (
        "7601",
        "Windows Server 2008 R2 Standard",
        "Microsoft Windows Server 2008 R2",
        "2008r2",
        "server",
    ),
    "wvista": ("6002", "Windows Vista Business", "Microsoft Windows Vista", "vista", "client"),
    "wxp": ("2600", "Windows XP Professional", "Microsoft Windows XP", "xp", "client"),
    "w2k": ("2195", "Windows 2000 Professional", "Microsoft Windows 2000", "2000", "client"),
    "w2k3": ("3790", "Windows Server 2003 Standard", "Microsoft Windows Server 2003", "2003", "server"),
    "win2022": ("20348", "Windows Server 2022 Standard", "Microsoft Windows Server 2022", "2022", "server"),
    "win2019": ("17763", "Windows Server 2019 Standard", "Microsoft Windows Server 2019", "2019", "server"),
    "win2025": ("26100", "Windows Server 2025 Standard", "Microsoft Windows Server 2025", "2025", "server"),
}
LINUX_OSINFO = {
    "id": "debian",
    "kernel-release": "6.12.48+deb13-amd64",
    "kernel-version": "#1 SMP PREEMPT_DYNAMIC Debian 6.12.48-1 (2025-09-20)",
    "machine": "x86_64",
    "name": "Debian GNU/Linux",
    "pretty-name": "Debian GNU/Linux 13 (trixie)",
    "version": "13 (trixie)",
    "version-id": "13",
}


# -- availability and errors ------------------------------------------------------------------------


def is_windows(guest: Guest) -> bool:
    return str(guest.config.get("ostype", "")).startswith("w")


def available_agent(call: Call) -> Guest:
    """The VM whose agent answers, or Proxmox's 500 for why it cannot (``assert_agent_available``)."""
    guest = guest_of(call, "qemu")
    if "agent" not in guest.config:
        raise ApiError(500, "No QEMU guest agent configured")
    if guest.status not in ("running", "paused"):
        raise ApiError(500, f"VM {guest.vmid} is not running")
    if guest.status != "running" or not agent_enabled(guest):
        raise ApiError(500, "QEMU guest agent is not running")
    return guest


def agent_error(guest: Guest, command: str, desc: str) -> ApiError:
    """An error qemu-guest-agent answered, as QMPClient dies with it."""
    return ApiError(500, f"VM {guest.vmid} qga command '{command}' failed - {desc}")


def inside(guest: Guest) -> dict[str, Any]:
    """The guest's agent-side state; processes and the freeze belong to one boot of the guest."""
    data = guest.agent
    if data.get("boot") != guest.started:
        data.update(boot=guest.started, processes={}, frozen=False)
        data.setdefault("files", {})
        data.setdefault("next_pid", 1000 + guest.vmid % 1000)
    return data


def supported(guest: Guest, command: str) -> bool:
    return command in QGA_COMMANDS and not (is_windows(guest) and command in WINDOWS_LACKS)


def run(call: Call, command: str) -> Guest:
    """The guest after the checks every command passes: agent up, command known and not frozen out."""
    guest = available_agent(call)
    qga = f"guest-{command}"
    if not supported(guest, qga):
        raise agent_error(guest, qga, UNSUPPORTED)
    if inside(guest)["frozen"] and qga not in FREEZE_ALLOWED:
        raise agent_error(guest, qga, f"Command {qga} has been disabled: the agent is in frozen state")
    return guest


# -- what the guest reports -------------------------------------------------------------------------


def info(call: Call, guest: Guest) -> Any:
    frozen = inside(guest)["frozen"]
    commands = [
        {
            "name": name,
            "enabled": not frozen or name in FREEZE_ALLOWED,
            "success-response": name not in NO_ANSWER,
        }
        for name in QGA_COMMANDS
        if supported(guest, name)
    ]
    return {"version": AGENT_VERSION, "supported_commands": commands}


def host_name(call: Call, guest: Guest) -> Any:
    return {"host-name": guest.name.upper()[:15] if is_windows(guest) else guest.name}


def osinfo(call: Call, guest: Guest) -> Any:
    ostype = str(guest.config.get("ostype", "other"))
    if ostype in WINDOWS:
        build, pretty, version, version_id, variant = WINDOWS[ostype]
        return {
            "id": "mswindows",
            "kernel-release": build,
            "kernel-version": "10.0" if int(build) >= 10240 else "6.1",
            "machine": "x86_64",
            "name": "Microsoft Windows",
            "pretty-name": pretty,
            "variant": variant,
            "variant-id": variant,
            "version": version,
            "version-id": version_id,
        }
    return dict(LINUX_OSINFO)


def get_time(call: Call, guest: Guest) -> Any:
    return int(call.clock.now() * 1_000_000_000)


def timezone(call: Call, guest: Guest) -> Any:
    return {"zone": "Coordinated Universal Time" if is_windows(guest) else "UTC", "offset": 0}


def users(call: Call, guest: Guest) -> Any:
    login = float(int(guest.started or call.clock.now()) + 120)
    if is_windows(guest):
        return [{"user": "Administrator", "domain": host_name(call, guest)["host-name"], "login-time": login}]
    return [{"user": "root", "login-time": login}]


def vcpus(call: Call, guest: Guest) -> Any:
    count = guest_usage(guest, call.clock.now())["cpus"]
    count = int(guest.config.get("vcpus") or count)
    return [{"logical-id": i, "online": True, "can-offline": i != 0} for i in range(count)]


def memory_blocks(call: Call, guest: Guest) -> Any:
    maxmem = guest_usage(guest, call.clock.now())["maxmem"]
    return [{"phys-index": i, "online": True, "can-offline": i >= 8} for i in range(maxmem // MEMORY_BLOCK)]


def memory_block_info(call: Call, guest: Guest) -> Any:
    return {"size": MEMORY_BLOCK}


def interfaces(call: Call, guest: Guest) -> Any:
    """Loopback, then one interface per NIC in index order: the NIC's MAC (lower case, as the guest
    shows it), the addresses the scenario gave it, and counters that add up to the VM's ``netin``/
    ``netout`` in ``/cluster/resources``."""
    usage = guest_usage(guest, call.clock.now())
    nics = guest_nics(guest)
    windows = is_windows(guest)
    loopback: dict[str, Any] = {
        "name": "Loopback Pseudo-Interface 1" if windows else "lo",
        "ip-addresses": [
            {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128},
            {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
        ],
    }
    if not windows:
        loopback["hardware-address"] = "00:00:00:00:00:00"
    result: list[dict[str, Any]] = [loopback]
    count = max(len(nics), 1)
    for index, (_, nic) in enumerate(nics):
        share = 1 if index else 0  # the remainder of an uneven split goes to the first NIC

        def part(total: int, share: int = share) -> int:
            return total // count + (total % count) * (1 - share)

        name = ("Ethernet" if index == 0 else f"Ethernet {index + 1}") if windows else f"eth{index}"
        result.append(
            {
                "name": name,
                "hardware-address": nic.get("macaddr", "").lower(),
                "ip-addresses": [
                    {"ip-address": ip, "ip-address-type": "ipv6" if ":" in ip else "ipv4", "prefix": prefix}
                    for iface, ip, prefix in guest.guest_ips
                    if iface == f"eth{index}"
                ],
                "statistics": {
                    "rx-bytes": part(usage["netin"]),
                    "tx-bytes": part(usage["netout"]),
                    "rx-packets": part(usage["netin"]) // 1000,
                    "tx-packets": part(usage["netout"]) // 1000,
                    "rx-errs": 0,
                    "tx-errs": 0,
                    "rx-dropped": 0,
                    "tx-dropped": 0,
                },
            }
        )
    return result


#: (mount point, file system) of a Linux guest's disks by position; Windows uses drive letters
LINUX_MOUNTS = (("/", "ext4"), ("/srv", "xfs"), ("/var/lib/data", "xfs"), ("/backup", "xfs"))
BUS_OF = {"scsi": "scsi", "virtio": "virtio", "sata": "sata", "ide": "ide"}


def filesystems(guest: Guest) -> list[dict[str, Any]]:
    """One mounted file system per disk of the config (CD-ROMs and unused volumes left out)."""
    out = []
    disks = [d for d in disk_entries(guest) if not d[0].startswith(("unused", "efidisk", "tpmstate"))]
    windows = is_windows(guest)
    for position, (key, _, _, size) in enumerate(disks):
        bus = next((b for b in BUS_OF if key.startswith(b)), "scsi")
        unit = int(key[len(bus) :] or 0)
        letter = "sd" if bus in ("scsi", "sata") else "vd" if bus == "virtio" else "hd"
        dev = f"/dev/{letter}{chr(ord('a') + position)}"
        used = int(size * (0.2 + (guest.vmid + position) % 7 / 20))
        if windows:
            mount, fstype, name = (
                f"{chr(ord('C') + position)}:\\",
                "NTFS",
                f"\\\\?\\Volume{{{guest.vmid:08d}-{position}}}\\",
            )
        else:
            mount, fstype = LINUX_MOUNTS[min(position, len(LINUX_MOUNTS) - 1)]
            name, dev = (f"{dev[5:]}1", f"{dev}1") if position == 0 else (dev[5:], dev)
        out.append(
            {
                "name": name,
                "mountpoint": mount,
                "type": fstype,
                "used-bytes": used,
                "total-bytes": int(size * 0.98),
                "disk": [
                    {
                        "pci-controller": {
                            "domain": 0,
                            "bus": 9 if bus == "scsi" else 0,
                            "slot": 1 + unit,
                            "function": 0,
                        },
                        "bus-type": bus,
                        "bus": 0,
                        "target": 0,
                        "unit": unit,
                        "serial": f"drive-{key}",
                        "dev": dev,
                    }
                ],
            }
        )
    return out


def fsinfo(call: Call, guest: Guest) -> Any:
    return filesystems(guest)


def fstrim(call: Call, guest: Guest) -> Any:
    return {
        "paths": [
            {"path": fs["mountpoint"], "trimmed": fs["total-bytes"] - fs["used-bytes"], "minimum": 0}
            for fs in filesystems(guest)
        ]
    }


def ping(call: Call, guest: Guest) -> Any:
    return {}


# -- what changes the guest ------------------------------------------------------------------------


def fsfreeze_status(call: Call, guest: Guest) -> Any:
    return "frozen" if inside(guest)["frozen"] else "thawed"


def fsfreeze_freeze(call: Call, guest: Guest) -> Any:
    """Freeze every mounted file system: the answer is how many (a second freeze is refused by the
    agent itself, as every command outside its allowlist is while frozen)."""
    inside(guest)["frozen"] = True
    return len(filesystems(guest))


def fsfreeze_thaw(call: Call, guest: Guest) -> Any:
    data = inside(guest)
    thawed = len(filesystems(guest)) if data["frozen"] else 0
    data["frozen"] = False
    return thawed


def power_off(call: Call, guest: Guest) -> Any:
    """``shutdown`` and ``suspend-disk`` end the QEMU process (the agent sends no answer: ``null``)."""
    set_running(guest, False)
    call.state.bump()
    return None


def suspend_to_ram(call: Call, guest: Guest) -> Any:
    guest.status = "paused"
    call.state.bump()
    return None


def set_user_password(call: Call) -> Any:
    guest = run(call, "set-user-password")
    known = {"Administrator"} if is_windows(guest) else {"root"} | {str(guest.config.get("ciuser", "root"))}
    if call.params["username"] not in known:
        raise agent_error(guest, "guest-set-user-password", "child process has failed to set user password")
    return {"result": {}}


# -- files --------------------------------------------------------------------------------------------


def default_files(guest: Guest) -> dict[str, bytes]:
    """Files every guest has before anybody writes one."""
    if is_windows(guest):
        return {"C:\\Windows\\System32\\drivers\\etc\\hosts": b"127.0.0.1 localhost\r\n"}
    osinfo_ = LINUX_OSINFO
    release = (
        f'PRETTY_NAME="{osinfo_["pretty-name"]}"\nNAME="{osinfo_["name"]}"\n'
        f'VERSION_ID="{osinfo_["version-id"]}"\nVERSION="{osinfo_["version"]}"\nID={osinfo_["id"]}\n'
    )
    return {
        "/etc/hostname": f"{guest.name}\n".encode(),
        "/etc/os-release": release.encode(),
        "/etc/hosts": f"127.0.0.1 localhost\n127.0.1.1 {guest.name}\n".encode(),
    }


def read_file(guest: Guest, path: str) -> bytes:
    files = inside(guest)["files"]
    content = files.get(path, default_files(guest).get(path))
    if content is None:
        raise agent_error(
            guest, "guest-file-open", f"failed to open file '{path}' (mode: 'r'): No such file or directory"
        )
    return bytes(content)


def file_read(call: Call) -> Any:
    guest = run(call, "file-open")
    content = read_file(guest, str(call.params["file"]))
    offset = int(call.params.get("offset") or 0)
    count = call.params.get("count")
    chunk = content[offset : offset + int(count)] if count is not None else content[offset:]
    decode = call.params.get("decode")
    text = (
        chunk.decode("utf-8", errors="replace")
        if decode in (None, 1, True)
        else base64.b64encode(chunk).decode()
    )
    result: dict[str, Any] = {"content": text, "bytes-read": len(chunk)}
    if offset + len(chunk) < len(content):
        result["truncated"] = 1
    return result


def file_write(call: Call) -> Any:
    guest = run(call, "file-open")
    content = str(call.params["content"])
    if call.params.get("encode") in (None, 1, True):
        data = content.encode()
    else:
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise agent_error(guest, "guest-file-write", "Base64 decoding failed") from None
    inside(guest)["files"][str(call.params["file"])] = data
    return None


# -- processes ----------------------------------------------------------------------------------------


def simulate(guest: Guest, argv: list[str], stdin: bytes) -> tuple[int, bytes, bytes, float]:
    """(exit code, stdout, stderr, seconds it runs) of a command in the guest. A few programs behave
    as on a real system (``echo``, ``cat``, ``hostname``, ``uname``, ``true``/``false``, ``sleep``,
    ``sh -c``, ``exit``); any other exits 0 without output."""
    if not argv:
        return 0, stdin, b"", 0.0
    program, args = argv[0].rsplit("/", 1)[-1], argv[1:]
    if program in ("sh", "bash", "dash") and len(args) >= 2 and args[0] == "-c":
        try:
            return simulate(guest, shlex.split(args[1]), stdin)
        except ValueError:
            return 2, b"", f"{program}: syntax error\n".encode(), 0.0
    if program == "echo":
        return 0, (" ".join(args) + "\n").encode(), b"", 0.0
    if program == "cat":
        if not args:
            return 0, stdin, b"", 0.0
        out, err, code = b"", b"", 0
        for path in args:
            try:
                out += read_file(guest, path)
            except ApiError:
                err += f"cat: {path}: No such file or directory\n".encode()
                code = 1
        return code, out, err, 0.0
    if program == "hostname":
        return 0, f"{guest.name}\n".encode(), b"", 0.0
    if program == "uname":
        release = LINUX_OSINFO["kernel-release"]
        text = (
            release
            if args[:1] == ["-r"]
            else f"Linux {guest.name} {release} x86_64 GNU/Linux"
            if args
            else "Linux"
        )
        return 0, f"{text}\n".encode(), b"", 0.0
    if program in ("false", "exit"):
        code = int(args[0]) if program == "exit" and args and args[0].isdigit() else 1
        return code, b"", b"", 0.0
    if program == "sleep":
        try:
            return 0, b"", b"", max(float(args[0]), 0.0) if args else 0.0
        except ValueError:
            return 1, b"", f"sleep: invalid time interval '{args[0]}'\n".encode(), 0.0
    return 0, b"", b"", 0.0


def exec_command(call: Call) -> Any:
    """``guest-exec`` with captured output: the pid of the process, which runs until the emulator's
    clock has passed its duration."""
    guest = run(call, "exec")
    command = call.params.get("command") or []
    argv = [str(part) for part in (command if isinstance(command, list) else [command])]
    stdin_text = call.params.get("input-data")
    if not argv and stdin_text is None:
        raise ApiError(500, "command or input-data (or both) required")
    data = inside(guest)
    pid = data["next_pid"]
    data["next_pid"] = pid + 1
    code, out, err, seconds = simulate(guest, argv, str(stdin_text or "").encode())
    data["processes"][pid] = {"ends": call.clock.now() + seconds, "exitcode": code, "out": out, "err": err}
    return {"pid": pid}


def exec_status(call: Call) -> Any:
    """A running process is ``exited: 0``; a finished one is reported once with its exit code and
    output (decoded, as qemu-server does), then forgotten, as qemu-guest-agent forgets it."""
    guest = run(call, "exec-status")
    pid = int(call.params["pid"])
    processes = inside(guest)["processes"]
    process = processes.get(pid)
    if process is None:
        raise agent_error(guest, "guest-exec-status", "Invalid parameter 'pid'")
    if call.clock.now() < process["ends"]:
        return {"exited": 0}
    del processes[pid]
    result: dict[str, Any] = {"exited": 1, "exitcode": process["exitcode"]}
    if process["out"]:
        result["out-data"] = process["out"].decode("utf-8", errors="replace")
    if process["err"]:
        result["err-data"] = process["err"].decode("utf-8", errors="replace")
    return result


# -- routes -------------------------------------------------------------------------------------------

#: command -> (HTTP method, what it answers), for the commands qemu-server relays as ``{result: ...}``
COMMANDS: dict[str, tuple[str, Any]] = {
    "ping": ("POST", ping),
    "info": ("GET", info),
    "get-time": ("GET", get_time),
    "get-host-name": ("GET", host_name),
    "get-osinfo": ("GET", osinfo),
    "get-timezone": ("GET", timezone),
    "get-users": ("GET", users),
    "get-vcpus": ("GET", vcpus),
    "get-fsinfo": ("GET", fsinfo),
    "get-memory-blocks": ("GET", memory_blocks),
    "get-memory-block-info": ("GET", memory_block_info),
    "network-get-interfaces": ("GET", interfaces),
    "fsfreeze-status": ("POST", fsfreeze_status),
    "fsfreeze-freeze": ("POST", fsfreeze_freeze),
    "fsfreeze-thaw": ("POST", fsfreeze_thaw),
    "fstrim": ("POST", fstrim),
    "shutdown": ("POST", power_off),
    "suspend-disk": ("POST", power_off),
    "suspend-ram": ("POST", suspend_to_ram),
    "suspend-hybrid": ("POST", suspend_to_ram),
}


def relay(call: Call, command: str) -> dict[str, Any]:
    guest = run(call, command)
    return {"result": COMMANDS[command][1](call, guest)}


def _command_handler(command: str) -> Any:
    def handler(call: Call) -> dict[str, Any]:
        return relay(call, command)

    return handler


def legacy_agent(call: Call) -> dict[str, Any]:
    """``POST .../agent`` with ``command``: the old single endpoint for the same commands."""
    return relay(call, str(call.params["command"]))


for _command, (_method, _) in COMMANDS.items():
    route(_method, f"{BASE}/{_command}")(_command_handler(_command))
route("POST", BASE)(legacy_agent)
route("POST", f"{BASE}/exec")(exec_command)
route("GET", f"{BASE}/exec-status")(exec_status)
route("GET", f"{BASE}/file-read")(file_read)
route("POST", f"{BASE}/file-write")(file_write)
route("POST", f"{BASE}/set-user-password")(set_user_password)
