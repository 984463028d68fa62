"""Node network interfaces (bridges, bonds, NICs, VLANs) and SDN zones, vnets and subnets."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from pve_emulator.errors import bad_param, not_found
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import digest

_DELETE_SPLIT = re.compile(r"[,;\s]+")


def _node(call: Call) -> dict[str, dict[str, Any]]:
    node = call.params["node"]
    if node not in call.state.nodes:
        raise not_found(f"node '{node}'")
    return call.state.networks.setdefault(node, {})


def iface_view(iface: str, cfg: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "iface": iface,
        "active": 1,
        "autostart": 1,
        "method": "static" if cfg.get("cidr") else "manual",
        "method6": "manual",
        "families": ["inet"],
        "priority": 1,
    }
    view.update(cfg)
    if cfg.get("cidr") and "address" not in cfg:
        net = ipaddress.ip_interface(cfg["cidr"])
        view["address"], view["netmask"] = str(net.ip), str(net.network.prefixlen)
    return view


@route("GET", "/nodes/{node}/network")
def list_network(call: Call) -> list[dict[str, Any]]:
    ifaces = _node(call)
    kind = call.get("type")
    out = []
    for name, cfg in sorted(ifaces.items()):
        if kind == "any_bridge" and cfg["type"] not in ("bridge", "OVSBridge"):
            continue
        if kind == "any_local_bridge" and cfg["type"] not in ("bridge", "OVSBridge"):
            continue
        if kind not in (None, "any_bridge", "any_local_bridge") and cfg["type"] != kind:
            continue
        out.append(iface_view(name, cfg))
    return out


_IFACE_CONTROL = {"node", "iface", "delete", "digest"}


def _iface_config(call: Call, existing: dict[str, Any] | None) -> dict[str, Any]:
    cfg = dict(existing or {})
    for key in (k for k in _DELETE_SPLIT.split(call.get("delete") or "") if k):
        cfg.pop(key, None)
    cfg.update({k: v for k, v in call.params.items() if k not in _IFACE_CONTROL})
    if "address" in call.params and "netmask" in call.params and "cidr" not in call.params:
        cfg["cidr"] = f"{call.params['address']}/{call.params['netmask']}"
    kind = cfg.get("type")
    if kind == "vlan" and "vlan-id" not in cfg:
        m = re.fullmatch(r"(.+)\.(\d+)", call.params["iface"])
        if not m:
            raise bad_param("vlan-id", "vlan-id is required unless the name is '<device>.<tag>'")
        cfg["vlan-raw-device"], cfg["vlan-id"] = m.group(1), int(m.group(2))
    return cfg


@route("POST", "/nodes/{node}/network")
def create_iface(call: Call) -> None:
    ifaces = _node(call)
    name = call.params["iface"]
    if name in ifaces:
        raise bad_param("iface", f"interface '{name}' already exists")
    cfg = _iface_config(call, None)
    for port in str(cfg.get("bridge_ports", "")).split() + str(cfg.get("slaves", "")).split():
        if port not in ifaces:
            raise bad_param(
                "bridge_ports" if "bridge_ports" in cfg else "slaves", f"interface '{port}' does not exist"
            )
    ifaces[name] = cfg
    call.state.bump()


def _iface(call: Call) -> tuple[dict[str, dict[str, Any]], str]:
    ifaces = _node(call)
    name = call.params["iface"]
    if name not in ifaces:
        raise not_found(f"interface '{name}'")
    return ifaces, name


@route("GET", "/nodes/{node}/network/{iface}")
def read_iface(call: Call) -> dict[str, Any]:
    ifaces, name = _iface(call)
    return iface_view(name, ifaces[name])


@route("PUT", "/nodes/{node}/network/{iface}")
def update_iface(call: Call) -> None:
    ifaces, name = _iface(call)
    ifaces[name] = _iface_config(call, ifaces[name])
    call.state.bump()


@route("DELETE", "/nodes/{node}/network/{iface}")
def delete_iface(call: Call) -> None:
    ifaces, name = _iface(call)
    del ifaces[name]
    call.state.bump()


@route("PUT", "/nodes/{node}/network")
def reload_network(call: Call) -> str:
    _node(call)
    return call.state.add_task(call.params["node"], "srvreload", "networking", call.identity.subject).upid


@route("DELETE", "/nodes/{node}/network")
def revert_network(call: Call) -> None:
    _node(call)


# --- SDN ------------------------------------------------------------------------------------------

_SDN_CONTROL = {"delete", "digest", "lock-token", "pending", "running"}


def _sdn_update(target: dict[str, Any], call: Call, key: str) -> None:
    for name in (k for k in _DELETE_SPLIT.split(call.get("delete") or "") if k):
        target.pop(name, None)
    target.update({k: v for k, v in call.params.items() if k not in _SDN_CONTROL and k != key})


@route("GET", "/cluster/sdn/zones")
def list_zones(call: Call) -> list[dict[str, Any]]:
    kind = call.get("type")
    return [
        {"zone": z, **cfg, "digest": digest(cfg)}
        for z, cfg in sorted(call.state.sdn_zones.items())
        if kind is None or cfg.get("type") == kind
    ]


@route("POST", "/cluster/sdn/zones")
def create_zone(call: Call) -> None:
    zone = call.params["zone"]
    if zone in call.state.sdn_zones:
        raise bad_param("zone", f"zone '{zone}' already exists")
    if call.params["type"] in ("vlan", "qinq") and "bridge" not in call.params:
        raise bad_param("bridge", f"property is required for {call.params['type']} zones")
    call.state.sdn_zones[zone] = {
        k: v for k, v in call.params.items() if k not in _SDN_CONTROL and k != "zone"
    }
    call.state.bump()


def _zone(call: Call) -> dict[str, Any]:
    zone = call.state.sdn_zones.get(call.params["zone"])
    if zone is None:
        raise not_found(f"sdn zone '{call.params['zone']}'")
    return zone


@route("GET", "/cluster/sdn/zones/{zone}")
def read_zone(call: Call) -> dict[str, Any]:
    cfg = _zone(call)
    return {"zone": call.params["zone"], **cfg, "digest": digest(cfg)}


@route("PUT", "/cluster/sdn/zones/{zone}")
def update_zone(call: Call) -> None:
    _sdn_update(_zone(call), call, "zone")
    call.state.bump()


@route("DELETE", "/cluster/sdn/zones/{zone}")
def delete_zone(call: Call) -> None:
    _zone(call)
    zone = call.params["zone"]
    if any(v.get("zone") == zone for v in call.state.sdn_vnets.values()):
        raise bad_param("zone", f"zone '{zone}' is used by a vnet")
    del call.state.sdn_zones[zone]
    call.state.bump()


@route("GET", "/cluster/sdn/vnets")
def list_vnets(call: Call) -> list[dict[str, Any]]:
    return [
        {"vnet": v, "type": "vnet", **cfg, "digest": digest(cfg)}
        for v, cfg in sorted(call.state.sdn_vnets.items())
    ]


@route("POST", "/cluster/sdn/vnets")
def create_vnet(call: Call) -> None:
    vnet = call.params["vnet"]
    if vnet in call.state.sdn_vnets:
        raise bad_param("vnet", f"vnet '{vnet}' already exists")
    if call.params["zone"] not in call.state.sdn_zones:
        raise bad_param("zone", f"zone '{call.params['zone']}' does not exist")
    cfg = {k: v for k, v in call.params.items() if k not in _SDN_CONTROL and k not in ("vnet", "type")}
    call.state.sdn_vnets[vnet] = cfg
    call.state.sdn_subnets.setdefault(vnet, {})
    call.state.bump()


def _vnet(call: Call) -> dict[str, Any]:
    vnet = call.state.sdn_vnets.get(call.params["vnet"])
    if vnet is None:
        raise not_found(f"sdn vnet '{call.params['vnet']}'")
    return vnet


@route("GET", "/cluster/sdn/vnets/{vnet}")
def read_vnet(call: Call) -> dict[str, Any]:
    cfg = _vnet(call)
    return {"vnet": call.params["vnet"], "type": "vnet", **cfg, "digest": digest(cfg)}


@route("PUT", "/cluster/sdn/vnets/{vnet}")
def update_vnet(call: Call) -> None:
    cfg = _vnet(call)
    if "zone" in call.params and call.params["zone"] not in call.state.sdn_zones:
        raise bad_param("zone", f"zone '{call.params['zone']}' does not exist")
    _sdn_update(cfg, call, "vnet")
    call.state.bump()


@route("DELETE", "/cluster/sdn/vnets/{vnet}")
def delete_vnet(call: Call) -> None:
    _vnet(call)
    if call.state.sdn_subnets.get(call.params["vnet"]):
        raise bad_param("vnet", f"vnet '{call.params['vnet']}' still has subnets")
    del call.state.sdn_vnets[call.params["vnet"]]
    call.state.sdn_subnets.pop(call.params["vnet"], None)
    call.state.bump()


def subnet_id(zone: str, cidr: str) -> str:
    """PVE names a subnet ``<zone>-<network>-<prefix>``."""
    return f"{zone}-{cidr.replace('/', '-')}"


def subnet_view(vnet: str, zone: str, cfg: dict[str, Any]) -> dict[str, Any]:
    net = ipaddress.ip_network(cfg["cidr"], strict=False)
    return {
        "subnet": subnet_id(zone, cfg["cidr"]),
        "id": subnet_id(zone, cfg["cidr"]),
        "type": "subnet",
        "vnet": vnet,
        "zone": zone,
        "network": str(net.network_address),
        "mask": str(net.prefixlen),
        **cfg,
        "digest": digest(cfg),
    }


@route("GET", "/cluster/sdn/vnets/{vnet}/subnets")
def list_subnets(call: Call) -> list[dict[str, Any]]:
    vnet = _vnet(call)
    subnets = call.state.sdn_subnets.get(call.params["vnet"], {})
    return [subnet_view(call.params["vnet"], vnet["zone"], cfg) for _, cfg in sorted(subnets.items())]


@route("POST", "/cluster/sdn/vnets/{vnet}/subnets")
def create_subnet(call: Call) -> None:
    vnet = _vnet(call)
    try:
        net = ipaddress.ip_network(call.params["subnet"], strict=False)
    except ValueError:
        raise bad_param("subnet", "value is not a CIDR") from None
    cidr = str(net)
    gateway = call.get("gateway")
    if gateway is not None and ipaddress.ip_address(gateway) not in net:
        raise bad_param("gateway", f"gateway {gateway} is not in subnet {cidr}")
    sid = subnet_id(vnet["zone"], cidr)
    subnets = call.state.sdn_subnets.setdefault(call.params["vnet"], {})
    if sid in subnets:
        raise bad_param("subnet", f"subnet '{sid}' already exists")
    cfg = {
        k: v for k, v in call.params.items() if k not in _SDN_CONTROL and k not in ("vnet", "type", "subnet")
    }
    subnets[sid] = {"cidr": cidr, **cfg}
    call.state.bump()


def _subnet(call: Call) -> tuple[dict[str, Any], str]:
    vnet = _vnet(call)
    subnets = call.state.sdn_subnets.get(call.params["vnet"], {})
    sid = call.params["subnet"]
    if sid not in subnets:
        # accept a CIDR too
        alt = subnet_id(vnet["zone"], sid) if "/" in sid else sid
        if alt not in subnets:
            raise not_found(f"subnet '{sid}'")
        sid = alt
    return subnets, sid


@route("GET", "/cluster/sdn/vnets/{vnet}/subnets/{subnet}")
def read_subnet(call: Call) -> dict[str, Any]:
    subnets, sid = _subnet(call)
    return subnet_view(call.params["vnet"], _vnet(call)["zone"], subnets[sid])


@route("PUT", "/cluster/sdn/vnets/{vnet}/subnets/{subnet}")
def update_subnet(call: Call) -> None:
    subnets, sid = _subnet(call)
    _sdn_update(subnets[sid], call, "subnet")
    subnets[sid].pop("vnet", None)
    call.state.bump()


@route("DELETE", "/cluster/sdn/vnets/{vnet}/subnets/{subnet}")
def delete_subnet(call: Call) -> None:
    subnets, sid = _subnet(call)
    del subnets[sid]
    call.state.bump()


@route("PUT", "/cluster/sdn")
def apply_sdn(call: Call) -> str:
    node = next(iter(call.state.nodes))
    return call.state.add_task(node, "reloadnetworkall", "", call.identity.subject).upid
