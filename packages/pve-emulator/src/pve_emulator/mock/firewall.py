"""The firewall API as pve-firewall serves it: rules at every level, security groups, aliases, ipsets,
options, refs and macros (``src/PVE/API2/Firewall/*.pm``).

Each level is one config file in Proxmox (``cluster.fw``, ``host.fw``, ``<vmid>.fw``); here its parts live
in ``state.generic`` under the API path of the level (``/cluster/firewall/rules``, ``.../aliases``, ...),
the layout the demo scenario writes. Every list carries Proxmox's ``digest`` (SHA-1 over the entries'
sorted ``key:value`` lines, ``copy_list_with_digest``); a change sent with an older digest fails with
Proxmox's 500 "detected modified configuration". Rule semantics are in ``mock/firewall_rules.py``.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import time
from typing import Any

from pve_emulator.errors import ApiError, ParameterError, bad_param
from pve_emulator.mock.firewall_rules import (
    MACRO_DESCR,
    MACRO_RULES,
    NAME_PATTERN,
    RULE_PROPERTIES,
    FwConf,
    parse_ip_or_cidr,
    schema_errors,
    verify_rule,
)
from pve_emulator.mock.generic import check_context, concrete
from pve_emulator.mock.locks import MODIFIED
from pve_emulator.mock.registry import Call, route
from pve_emulator.mock.state import ClusterState

CLUSTER = "/cluster/firewall"
GROUPS = f"{CLUSTER}/groups"
_GUESTS = ("/nodes/{node}/qemu/{vmid}/firewall", "/nodes/{node}/lxc/{vmid}/firewall")
_LEVELS = (CLUSTER, "/nodes/{node}/firewall", *_GUESTS)
_SPLIT = re.compile(r"[,;\s]+")
_ALIAS_REF = re.compile(rf"(dc/|guest/)?({NAME_PATTERN})")


# -- digests ----------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return str(int(value)) if isinstance(value, bool) else str(value)


def list_digest(entries: list[dict[str, Any]]) -> str:
    """``copy_list_with_digest``: SHA-1 over ``key:value\\n`` of every defined scalar, keys sorted."""
    sha = hashlib.sha1()
    for entry in entries:
        for key in sorted(entry):
            value = entry[key]
            if value is not None and not isinstance(value, dict | list):
                sha.update(f"{key}:{_text(value)}\n".encode())
    return sha.hexdigest()


def object_digest(data: dict[str, Any]) -> str:
    """``copy_opject_with_digest`` (sic): the same over one object."""
    return list_digest([data])


def _with_digest(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    digest = list_digest(entries)
    return [{**e, "digest": digest} for e in entries]


def _assert_unmodified(current: str, call: Call) -> None:
    """``PVE::Tools::assert_if_modified``: a plain ``die``, so HTTP 500 as on a real node."""
    given = call.get("digest")
    if given and given != current:
        raise ApiError(500, MODIFIED)


# -- stored parts of a level ------------------------------------------------------------------------


def _clean(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry as the config parser returns it: no API-only keys, no undefined or false flags."""
    out = {k: v for k, v in entry.items() if k not in ("pos", "digest") and v is not None}
    if not out.get("nomatch"):
        out.pop("nomatch", None)
    return out


def _base(call: Call) -> str:
    path = call.op.path
    return concrete(path[: path.index("/firewall") + len("/firewall")], call.params)


def _env(path: str) -> str:
    if path.startswith(GROUPS + "/"):
        return "group"
    if path.startswith(CLUSTER):
        return "cluster"
    return "vm" if "/qemu/" in path else "ct" if "/lxc/" in path else "host"


def _ordered(store: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    keys = sorted(store, key=lambda k: (0, int(k), "") if k.isdigit() else (1, 0, k))
    return [_clean(store[k]) for k in keys]


def _aliases(state: ClusterState, base: str) -> dict[str, dict[str, Any]]:
    out = {}
    for key, entry in state.generic.get(f"{base}/aliases", {}).items():
        alias = _clean(entry)
        if "ipversion" not in alias and alias.get("cidr"):
            alias["cidr"], alias["ipversion"] = parse_ip_or_cidr(str(alias["cidr"]))
        out[key.lower()] = alias
    return out


def _ipset_names(state: ClusterState, base: str) -> dict[str, dict[str, Any]]:
    return {k: _clean(v) for k, v in sorted(state.generic.get(f"{base}/ipset", {}).items())}


def _conf(state: ClusterState, base: str) -> FwConf:
    return FwConf(aliases=_aliases(state, base), ipsets=set(_ipset_names(state, base)))


def _rule_confs(call: Call) -> tuple[FwConf | None, FwConf]:
    """``load_config``'s ``($cluster_conf, $fw_conf)``: no separate cluster config at cluster/group level."""
    base = _base(call)
    local = _conf(call.state, base)
    return (None, local) if base == CLUSTER else (_conf(call.state, CLUSTER), local)


# -- rules (cluster, host, guests, security groups) ---------------------------------------------------


def _rules_key(call: Call) -> str:
    if _env(call.op.path) == "group":
        return f"{GROUPS}/{call.params['group']}"
    return f"{_base(call)}/rules"


def _load_rules(call: Call) -> list[dict[str, Any]]:
    check_context(call.state, call.op, call.params)
    if _env(call.op.path) == "group" and call.params["group"] not in call.state.generic.get(GROUPS, {}):
        raise ApiError(500, f"no such security group '{call.params['group']}'")
    return _ordered(call.state.generic.get(_rules_key(call), {}))


def _save_rules(call: Call, rules: list[dict[str, Any]]) -> None:
    call.state.generic[_rules_key(call)] = {str(pos): rule for pos, rule in enumerate(rules)}
    call.state.bump()


def list_rules(call: Call) -> list[dict[str, Any]]:
    return [{**rule, "pos": pos} for pos, rule in enumerate(_with_digest(_load_rules(call)))]


def read_rule(call: Call) -> dict[str, Any]:
    rules = _with_digest(_load_rules(call))
    pos = int(call.params["pos"])
    if pos >= len(rules):
        raise ApiError(500, f"no rule at position {pos}")
    return {**rules[pos], "pos": pos}


def _copy_rule_data(rule: dict[str, Any], params: dict[str, Any]) -> None:
    """``copy_rule_data``: '' or '-' removes a property; ``pos``/``digest`` never reach the file."""
    for key in RULE_PROPERTIES:
        if key in ("pos", "digest") or params.get(key) is None:
            continue
        if params[key] in ("", "-"):
            rule.pop(key, None)
        else:
            rule[key] = params[key]


def _verify(call: Call, rule: dict[str, Any]) -> None:
    errors = schema_errors(call.params)
    if errors:
        raise ParameterError(errors)
    cluster, local = _rule_confs(call)
    verify_rule(rule, _env(call.op.path), cluster, local)


def create_rule(call: Call) -> None:
    """A new rule goes first (``unshift``) and is disabled unless ``enable`` says otherwise."""
    rules = _load_rules(call)
    rule: dict[str, Any] = {}
    _copy_rule_data(rule, call.params)
    _verify(call, rule)
    if call.get("enable") is None:
        rule["enable"] = 0
    _save_rules(call, [rule, *rules])


def update_rule(call: Call) -> None:
    rules = _load_rules(call)
    _assert_unmodified(list_digest(rules), call)
    pos = int(call.params["pos"])
    if pos >= len(rules):
        raise ApiError(500, f"no rule at position {pos}")
    rule = rules[pos]
    moveto = call.get("moveto")
    if moveto is not None and int(moveto) != pos:
        moved: list[dict[str, Any]] = []
        for i, other in enumerate(rules):
            if i == pos:
                continue
            moved += [rule, other] if i == int(moveto) else [other]
        _save_rules(call, [*moved, rule] if int(moveto) >= len(rules) else moved)
        return
    _copy_rule_data(rule, call.params)
    for key in (k for k in _SPLIT.split(call.get("delete") or "") if k):
        if key not in RULE_PROPERTIES:
            raise bad_param("delete", f"no such property ('{key}')")
        if key in ("type", "action"):
            raise bad_param("delete", f"unable to delete required property '{key}'")
        rule.pop(key, None)
    _verify(call, rule)
    _save_rules(call, rules)


def delete_rule(call: Call) -> None:
    rules = _load_rules(call)
    _assert_unmodified(list_digest(rules), call)
    pos = int(call.params["pos"])
    if pos >= len(rules):
        raise ApiError(500, f"no rule at position {pos}")
    del rules[pos]
    _save_rules(call, rules)


for _rules in (*(f"{level}/rules" for level in _LEVELS), GROUPS + "/{group}"):
    route("GET", _rules)(list_rules)
    route("POST", _rules)(create_rule)
    route("GET", _rules + "/{pos}")(read_rule)
    route("PUT", _rules + "/{pos}")(update_rule)
    route("DELETE", _rules + "/{pos}")(delete_rule)


# -- security groups ----------------------------------------------------------------------------------


def _group_list(state: ClusterState) -> list[dict[str, Any]]:
    groups = state.generic.get(GROUPS, {})
    out = []
    for name in sorted(groups):
        entry: dict[str, Any] = {"group": name}
        if comment := groups[name].get("comment"):
            entry["comment"] = comment
        out.append(entry)
    return out


@route("GET", GROUPS)
def list_groups(call: Call) -> list[dict[str, Any]]:
    return _with_digest(_group_list(call.state))


@route("POST", GROUPS)
def create_group(call: Call) -> None:
    """Create, or with ``rename`` rename (rules that jump to the group follow) or re-comment a group."""
    state, group, rename, comment = call.state, call.params["group"], call.get("rename"), call.get("comment")
    groups = state.generic.setdefault(GROUPS, {})
    if rename:
        _assert_unmodified(list_digest(_group_list(state)), call)
        if rename not in groups:
            raise bad_param("group", f"Security group '{rename}' does not exist")
        if group in groups and group != rename:
            raise bad_param("group", f"Security group '{group}' does already exist")
        if rename == group:
            if comment is not None:
                groups[group]["comment"] = comment
            state.bump()
            return
        groups[group] = {**groups.pop(rename), "group": group}
        if comment is not None:
            groups[group]["comment"] = comment
        state.generic[f"{GROUPS}/{group}"] = state.generic.pop(f"{GROUPS}/{rename}", {})
        for key, store in state.generic.items():
            if key.endswith("/firewall/rules"):
                for rule in store.values():
                    if rule.get("type") == "group" and rule.get("action") == rename:
                        rule["action"] = group
    else:
        if group in groups:
            raise bad_param("group", f"Security group '{group}' already exists")
        groups[group] = {"group": group, **({"comment": comment} if comment is not None else {})}
        state.generic[f"{GROUPS}/{group}"] = {}
    state.bump()


@route("DELETE", GROUPS + "/{group}")
def delete_group(call: Call) -> None:
    if _load_rules(call):
        raise ApiError(500, f"Security group '{call.params['group']}' is not empty")
    call.state.generic[GROUPS].pop(call.params["group"])
    call.state.generic.pop(f"{GROUPS}/{call.params['group']}", None)
    call.state.bump()


# -- aliases (cluster, guests) -----------------------------------------------------------------------


def _alias_list(call: Call) -> list[dict[str, Any]]:
    check_context(call.state, call.op, call.params)
    aliases = _aliases(call.state, _base(call))
    return [aliases[k] for k in sorted(aliases)]


def _save_aliases(call: Call, aliases: dict[str, dict[str, Any]]) -> None:
    call.state.generic[f"{_base(call)}/aliases"] = aliases
    call.state.bump()


def _alias_data(call: Call) -> dict[str, Any]:
    cidr, version = parse_ip_or_cidr(str(call.params["cidr"]))
    data = {"name": call.params["name"], "cidr": cidr, "ipversion": version}
    if call.get("comment"):
        data["comment"] = call.params["comment"]
    return data


def list_aliases(call: Call) -> list[dict[str, Any]]:
    return _with_digest(_alias_list(call))


def create_alias(call: Call) -> None:
    aliases = {a["name"].lower(): a for a in _alias_list(call)}
    if call.params["name"].lower() in aliases:
        raise bad_param("name", f"alias '{call.params['name']}' already exists")
    aliases[call.params["name"].lower()] = _alias_data(call)
    _save_aliases(call, aliases)


def read_alias(call: Call) -> dict[str, Any]:
    aliases = {a["name"].lower(): a for a in _alias_list(call)}
    if call.params["name"].lower() not in aliases:
        raise bad_param("name", "no such alias")
    return aliases[call.params["name"].lower()]


def update_alias(call: Call) -> None:
    listed = _alias_list(call)
    _assert_unmodified(list_digest(listed), call)
    aliases = {a["name"].lower(): a for a in listed}
    name = call.params["name"].lower()
    if name not in aliases:
        raise bad_param("name", "no such alias")
    aliases[name] = _alias_data(call)
    rename = call.get("rename")
    if rename and rename.lower() != name:
        if rename.lower() in aliases:
            raise bad_param("name", f"alias '{rename}' already exists")
        aliases[rename.lower()] = {**aliases.pop(name), "name": rename}
    _save_aliases(call, aliases)


def delete_alias(call: Call) -> None:
    listed = _alias_list(call)
    _assert_unmodified(list_digest(listed), call)
    aliases = {a["name"].lower(): a for a in listed}
    aliases.pop(call.params["name"].lower(), None)
    _save_aliases(call, aliases)


for _level in (CLUSTER, *_GUESTS):
    route("GET", f"{_level}/aliases")(list_aliases)
    route("POST", f"{_level}/aliases")(create_alias)
    route("GET", f"{_level}/aliases/{{name}}")(read_alias)
    route("PUT", f"{_level}/aliases/{{name}}")(update_alias)
    route("DELETE", f"{_level}/aliases/{{name}}")(delete_alias)


# -- ipsets (cluster, guests) ------------------------------------------------------------------------


def _ipset_list(call: Call) -> list[dict[str, Any]]:
    check_context(call.state, call.op, call.params)
    out = []
    for name, data in _ipset_names(call.state, _base(call)).items():
        entry: dict[str, Any] = {"name": name}
        if data.get("comment"):
            entry["comment"] = data["comment"]
        out.append(entry)
    return out


def list_ipsets(call: Call) -> list[dict[str, Any]]:
    return _with_digest(_ipset_list(call))


def create_ipset(call: Call) -> None:
    """Create, or with ``rename`` rename or re-comment an ipset (its entries move with it)."""
    listed = _ipset_list(call)
    base, name, rename, comment = _base(call), call.params["name"], call.get("rename"), call.get("comment")
    index = call.state.generic.setdefault(f"{base}/ipset", {})
    if rename:
        _assert_unmodified(list_digest(listed), call)
        if rename not in index:
            raise bad_param("name", f"IPSet '{rename}' does not exist")
        if name in index and name != rename:
            raise bad_param("name", f"IPSet '{name}' does already exist")
        data = {**index.pop(rename), "name": name}
        if comment is not None:
            data["comment"] = comment
        index[name] = data
        entries = call.state.generic.pop(f"{base}/ipset/{rename}", {})
        call.state.generic[f"{base}/ipset/{name}"] = entries
    else:
        if name in index:
            raise bad_param("name", f"IPSet '{name}' already exists")
        index[name] = {"name": name, **({"comment": comment} if comment is not None else {})}
        call.state.generic[f"{base}/ipset/{name}"] = {}
    call.state.bump()


def _entries(call: Call) -> list[dict[str, Any]]:
    check_context(call.state, call.op, call.params)
    base, name = _base(call), call.params["name"]
    if name not in call.state.generic.get(f"{base}/ipset", {}):
        raise ApiError(500, f"no such IPSet '{name}'")
    return _ordered(call.state.generic.get(f"{base}/ipset/{name}", {}))


def _save_entries(call: Call, entries: list[dict[str, Any]]) -> None:
    """The config writer keeps one entry per address, sorted by it."""
    by_cidr = {str(e["cidr"]): e for e in reversed(entries)}
    call.state.generic[f"{_base(call)}/ipset/{call.params['name']}"] = {
        str(pos): by_cidr[cidr] for pos, cidr in enumerate(sorted(by_cidr))
    }
    call.state.bump()


def list_entries(call: Call) -> list[dict[str, Any]]:
    return _with_digest(_entries(call))


def delete_ipset(call: Call) -> None:
    if _entries(call) and not call.get("force"):
        raise ApiError(500, f"IPSet '{call.params['name']}' is not empty")
    base = _base(call)
    call.state.generic[f"{base}/ipset"].pop(call.params["name"])
    call.state.generic.pop(f"{base}/ipset/{call.params['name']}", None)
    call.state.bump()


def add_entry(call: Call) -> None:
    """An address, a network or an alias that must exist; no duplicate, no zero prefix."""
    entries = _entries(call)
    cidr = str(call.params["cidr"])
    if m := _ALIAS_REF.fullmatch(cidr):
        scope, alias = m.group(1) or "", m.group(2).lower()
        local = _aliases(call.state, _base(call)) if _base(call) != CLUSTER else {}
        cluster = _aliases(call.state, CLUSTER)
        if not ((scope != "dc/" and alias in local) or (scope != "guest/" and alias in cluster)):
            raise ApiError(500, f"no such alias '{m.group(2)}'")
    else:
        try:
            cidr, _ = parse_ip_or_cidr(_clean_cidr(cidr))
        except ValueError as exc:
            raise bad_param("cidr", f"invalid format - {exc}") from None
    if any(str(e["cidr"]) == cidr for e in entries):
        raise bad_param("cidr", f"address '{cidr}' already exists")
    if re.search(r"/0+$", cidr):
        raise bad_param("cidr", "a zero prefix is not allowed in ipset entries")
    data: dict[str, Any] = {"cidr": cidr}
    if call.get("nomatch"):
        data["nomatch"] = 1
    if call.get("comment"):
        data["comment"] = call.params["comment"]
    _save_entries(call, [data, *entries])


def _clean_cidr(cidr: str) -> str:
    """``clean_cidr``: host bits of a network cleared (``10.0.0.5/8`` is stored as ``10.0.0.0/8``)."""
    address, _, length = cidr.partition("/")
    if not length:
        return cidr
    try:
        network = ipaddress.ip_network(f"{address}/{length}", strict=False)
    except ValueError:
        return cidr
    return f"{network.network_address}/{length}"


def _find_entry(call: Call, entries: list[dict[str, Any]]) -> dict[str, Any]:
    for entry in entries:
        if str(entry["cidr"]) == str(call.params["cidr"]):
            return entry
    raise bad_param("cidr", "no such IP/Network")


def read_entry(call: Call) -> dict[str, Any]:
    return _find_entry(call, _with_digest(_entries(call)))


def update_entry(call: Call) -> None:
    entries = _entries(call)
    _assert_unmodified(list_digest(entries), call)
    entry = _find_entry(call, entries)
    entry.pop("nomatch", None)
    entry.pop("comment", None)
    if call.get("nomatch"):
        entry["nomatch"] = 1
    if call.get("comment"):
        entry["comment"] = call.params["comment"]
    _save_entries(call, entries)


def delete_entry(call: Call) -> None:
    entries = _entries(call)
    _assert_unmodified(list_digest(entries), call)
    _save_entries(call, [e for e in entries if str(e["cidr"]) != str(call.params["cidr"])])


for _level in (CLUSTER, *_GUESTS):
    route("GET", f"{_level}/ipset")(list_ipsets)
    route("POST", f"{_level}/ipset")(create_ipset)
    route("GET", f"{_level}/ipset/{{name}}")(list_entries)
    route("POST", f"{_level}/ipset/{{name}}")(add_entry)
    route("DELETE", f"{_level}/ipset/{{name}}")(delete_ipset)
    route("GET", f"{_level}/ipset/{{name}}/{{cidr}}")(read_entry)
    route("PUT", f"{_level}/ipset/{{name}}/{{cidr}}")(update_entry)
    route("DELETE", f"{_level}/ipset/{{name}}/{{cidr}}")(delete_entry)


# -- options, refs, macros ---------------------------------------------------------------------------


def _options(call: Call) -> dict[str, Any]:
    check_context(call.state, call.op, call.params)
    return {
        k: v
        for k, v in call.state.generic.get(f"{_base(call)}/options", {}).get(".", {}).items()
        if v is not None
    }


def read_options(call: Call) -> dict[str, Any]:
    options = _options(call)
    return {**options, "digest": object_digest(options)}


def update_options(call: Call) -> None:
    options = _options(call)
    _assert_unmodified(object_digest(options), call)
    known = {k for k in call.op.params if k not in ("delete", "digest", *call.op.path_params)}
    for key in (k for k in _SPLIT.split(call.get("delete") or "") if k):
        if key not in known:
            raise bad_param("delete", f"no such option '{key}'")
        options.pop(key, None)
    if call.op.path == f"{CLUSTER}/options" and int(call.get("enable") or 0) > 1:
        call.params["enable"] = int(time.time())  # the anti-lockout double call's timestamp
    options.update({k: v for k, v in call.params.items() if k in known})
    call.state.generic.setdefault(f"{_base(call)}/options", {})["."] = options
    call.state.bump()


for _level in _LEVELS:
    route("GET", f"{_level}/options")(read_options)
    route("PUT", f"{_level}/options")(update_options)


def _refs(state: ClusterState, base: str, scope: str, kind: str | None) -> list[dict[str, Any]]:
    """``collect_refs``: ipsets (``+name``) then aliases of one level."""
    out: list[dict[str, Any]] = []
    if kind in (None, "ipset"):
        for name, data in _ipset_names(state, base).items():
            entry = {"type": "ipset", "name": name, "ref": f"+{name}", "scope": scope}
            out.append({**entry, "comment": data["comment"]} if data.get("comment") else entry)
    if kind in (None, "alias"):
        for name, data in sorted(_aliases(state, base).items()):
            entry = {"type": "alias", "name": name, "ref": name, "scope": scope}
            out.append({**entry, "comment": data["comment"]} if data.get("comment") else entry)
    return out


@route("GET", f"{CLUSTER}/refs")
def cluster_refs(call: Call) -> list[dict[str, Any]]:
    return _refs(call.state, CLUSTER, "dc", call.get("type"))


def guest_refs(call: Call) -> list[dict[str, Any]]:
    check_context(call.state, call.op, call.params)
    kind = call.get("type")
    return _refs(call.state, CLUSTER, "dc", kind) + _refs(call.state, _base(call), "guest", kind)


for _level in _GUESTS:
    route("GET", f"{_level}/refs")(guest_refs)


@route("GET", f"{CLUSTER}/macros")
def list_macros(call: Call) -> list[dict[str, Any]]:
    return [{"macro": name, "descr": MACRO_DESCR.get(name, name)} for name in sorted(MACRO_RULES)]
