"""Firewall rules, groups, aliases, ipsets and options judged as pve-firewall judges them (Firewall.pm and
API2/Firewall/*.pm): new rules first and disabled, ``moveto``, field validation, digests."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pve_emulator.testing import running_emulator

MODIFIED = "detected modified configuration - file changed by other user? Try again.\n"


@pytest.fixture(scope="module")
def api() -> Iterator[httpx.Client]:
    """One demo emulator: each test works on its own level (guest, node, group) so they do not meet."""
    with running_emulator(task_duration=0.01) as pve:
        headers = {"Authorization": f"PVEAPIToken={pve.token_id}={pve.token_secret}"}
        with httpx.Client(base_url=pve.api_url, headers=headers, timeout=10) as client:
            yield client


def _data(resp: httpx.Response) -> Any:
    assert resp.status_code == 200, resp.text
    return resp.json()["data"]


def _refused(resp: httpx.Response, field: str) -> str:
    assert resp.status_code == 400, resp.text
    return resp.json()["errors"][field]


def test_new_rule_goes_first_disabled_and_digest_is_proxmox_sha1(api: httpx.Client) -> None:
    rules = "/nodes/pve1/qemu/100/firewall/rules"
    assert _data(api.get(rules)) == []
    _data(api.post(rules, data={"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22"}))
    _data(api.post(rules, data={"type": "out", "action": "DROP", "enable": 1, "comment": "second"}))
    listed = _data(api.get(rules))
    assert [(r["pos"], r["type"], r["enable"]) for r in listed] == [(0, "out", 1), (1, "in", 0)]
    # copy_list_with_digest: "key:value\n" for each entry's keys in sorted order, one SHA-1 for the list
    text = "action:DROP\ncomment:second\nenable:1\ntype:out\naction:ACCEPT\ndport:22\nenable:0\nproto:tcp\ntype:in\n"
    assert {r["digest"] for r in listed} == {hashlib.sha1(text.encode()).hexdigest()}
    assert _data(api.get(f"{rules}/1")) == {**listed[1], "pos": 1}


def test_stale_digest_refuses_update_and_delete(api: httpx.Client) -> None:
    rules = "/nodes/pve2/qemu/101/firewall/rules"
    _data(api.post(rules, data={"type": "in", "action": "ACCEPT", "macro": "Ping"}))
    old = _data(api.get(rules))[0]["digest"]
    _data(api.put(f"{rules}/0", data={"comment": "edited", "digest": old}))
    stale = api.put(f"{rules}/0", data={"comment": "again", "digest": old})
    assert stale.status_code == 500 and stale.json()["message"] == MODIFIED
    assert api.delete(f"{rules}/0", params={"digest": old}).json()["message"] == MODIFIED
    current = _data(api.get(rules))
    assert current[0]["comment"] == "edited"
    _data(api.delete(f"{rules}/0", params={"digest": current[0]["digest"]}))
    assert _data(api.get(rules)) == []
    missing = api.get(f"{rules}/3")
    assert missing.status_code == 500 and missing.json()["message"] == "no rule at position 3\n"


def test_moveto_moves_a_rule_as_pve_firewall_does(api: httpx.Client) -> None:
    rules = "/nodes/pve3/firewall/rules"
    for port in ("4", "3", "2", "1", "0"):  # each new rule goes first: 0 1 2 3 4
        _data(api.post(rules, data={"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": port}))

    def order() -> list[str]:
        return [r["dport"] for r in _data(api.get(rules))]

    assert order() == ["0", "1", "2", "3", "4"]
    _data(api.put(f"{rules}/0", data={"moveto": 3, "comment": "ignored"}))  # lands before old #3
    assert order() == ["1", "2", "0", "3", "4"]
    _data(api.put(f"{rules}/4", data={"moveto": 0}))
    assert order() == ["4", "1", "2", "0", "3"]
    _data(api.put(f"{rules}/0", data={"moveto": 99}))
    assert order() == ["1", "2", "0", "3", "4"]
    assert all("comment" not in r for r in _data(api.get(rules)))


@pytest.mark.parametrize(
    ("rule", "field", "message"),
    [
        ({"action": "FOO"}, "action", "unknown action 'FOO'"),
        ({"macro": "NoSuch"}, "macro", "unknown macro 'NoSuch'"),
        ({"proto": "foo"}, "proto", "invalid format - unknown protocol 'foo'"),
        ({"proto": "tcp", "dport": "70000"}, "dport", "invalid format - invalid port '70000'"),
        (
            {"proto": "tcp", "dport": "443:80"},
            "dport",
            "invalid format - backwards range '443:80' not allowed, did you mean '80:443'?",
        ),
        (
            {"proto": "tcp", "sport": "nosuchservice"},
            "sport",
            "invalid format - invalid port 'nosuchservice'",
        ),
        (
            {"proto": "tcp", "dport": ",".join(str(p) for p in range(1, 17))},
            "dport",
            "invalid format - too many entries in port list (> 15 numbers)",
        ),
        ({"dport": "22"}, "proto", "missing property - 'dport' requires this property"),
        ({"proto": "gre", "dport": "22"}, "dport", "protocol 'gre' does not support ports"),
        (
            {"proto": "tcp", "icmp-type": "echo-request"},
            "proto",
            "missing property - 'icmp-type' requires this property",
        ),
        (
            {"source": "10.0.0.5/24"},
            "source",
            "invalid format - invalid IP address: Invalid prefix 00001010000000000000000000000101/24",
        ),
        (
            {"source": "10.0.0.1,fe80::1"},
            "source",
            "invalid format - detected mixed ipv4/ipv6 addresses in address list '10.0.0.1,fe80::1'",
        ),
        ({"dest": "10.0.0.1-10.0.0.9,10.1.0.1"}, "dest", "invalid format - you can't use a range in a list"),
        ({"source": "10.0.0.0/8", "dest": "fe80::/64"}, "dest", "detected mixed ipv4/ipv6 addresses in rule"),
        ({"source": "+nosuch"}, "source", "no such ipset 'nosuch'"),
        ({"dest": "nosuchalias"}, "dest", "no such alias 'nosuchalias'"),
        (
            {"macro": "SSH", "proto": "udp"},
            "proto",
            "parameter 'proto' already define in macro (value = 'tcp')",
        ),
        ({"type": "forward", "action": "REJECT"}, "action", "cannot define REJECT rules on forward chain"),
        ({"log": "loud"}, "log", None),
    ],
)
def test_rule_fields_are_validated_like_pve_firewall(
    api: httpx.Client, rule: dict[str, str], field: str, message: str | None
) -> None:
    before = _data(api.get("/cluster/firewall/rules"))
    error = _refused(
        api.post("/cluster/firewall/rules", data={"type": "in", "action": "ACCEPT", **rule}), field
    )
    assert message is None or error == message
    assert _data(api.get("/cluster/firewall/rules")) == before  # nothing written


def test_accepted_rules_keep_references_ports_and_macro_spelling(api: httpx.Client) -> None:
    rules = "/cluster/firewall/groups/web"
    accepted = [
        {"proto": "tcp", "dport": "http,https,8000:8100", "source": "+mgmt-nets"},
        {"proto": "udp", "sport": "53", "dest": "+dc/mgmt-nets"},
        {"macro": "ssh", "source": "gateway"},
        {"proto": "icmp", "icmp-type": "echo-request"},
        {"source": "fe80::/64", "proto": "ipv6-icmp"},
    ]
    for rule in accepted:
        _data(api.post(rules, data={"type": "in", "action": "ACCEPT", "enable": 1, **rule}))
    listed = _data(api.get(rules))[: len(accepted)][::-1]  # newest first: back to the order of `accepted`
    assert [r.get("ipversion") for r in listed] == [None, None, 4, 4, 6]  # the alias brings its version
    assert listed[2]["macro"] == "SSH"  # the preferred spelling, as verify_rule stores it
    group_rule = api.post(rules, data={"type": "group", "action": "mgmt"})
    assert _refused(group_rule, "type") == "invalid rule type 'group' for rule_env 'group'"
    vm_iface = api.post(
        "/nodes/pve1/lxc/200/firewall/rules", data={"type": "in", "action": "DROP", "iface": "eth0"}
    )
    assert _refused(vm_iface, "iface") == "value does not match the regex pattern 'net\\d+'"


def test_update_deletes_and_revalidates(api: httpx.Client) -> None:
    rules = "/nodes/pve2/lxc/201/firewall/rules"
    _data(
        api.post(
            rules, data={"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22", "comment": "x"}
        )
    )
    assert _refused(api.put(f"{rules}/0", data={"delete": "proto"}), "proto") == (
        "missing property - 'dport' requires this property"
    )
    assert _refused(api.put(f"{rules}/0", data={"delete": "action"}), "delete") == (
        "unable to delete required property 'action'"
    )
    _data(api.put(f"{rules}/0", data={"delete": "comment,dport", "proto": "udp"}))
    assert {k: v for k, v in _data(api.get(f"{rules}/0")).items() if k != "digest"} == {
        "type": "in",
        "action": "ACCEPT",
        "proto": "udp",
        "enable": 0,
        "pos": 0,
    }


def test_security_groups_rename_delete_and_digest(api: httpx.Client) -> None:
    _data(api.post("/cluster/firewall/groups", data={"group": "dbs", "comment": "databases"}))
    assert _refused(api.post("/cluster/firewall/groups", data={"group": "dbs"}), "group") == (
        "Security group 'dbs' already exists"
    )
    _data(api.post("/cluster/firewall/rules", data={"type": "group", "action": "dbs", "enable": 1}))
    _data(
        api.post(
            "/cluster/firewall/groups/dbs", data={"type": "in", "action": "ACCEPT", "macro": "PostgreSQL"}
        )
    )
    digest = _data(api.get("/cluster/firewall/groups"))[0]["digest"]
    _data(api.post("/cluster/firewall/groups", data={"group": "pg", "rename": "dbs", "digest": digest}))
    stale = api.post("/cluster/firewall/groups", data={"group": "x1", "rename": "pg", "digest": digest})
    assert stale.status_code == 500 and stale.json()["message"] == MODIFIED
    groups = {g["group"]: g.get("comment") for g in _data(api.get("/cluster/firewall/groups"))}
    assert groups["pg"] == "databases" and "dbs" not in groups
    assert _data(api.get("/cluster/firewall/rules"))[0]["action"] == "pg"  # the jump follows the rename
    not_empty = api.delete("/cluster/firewall/groups/pg")
    assert (
        not_empty.status_code == 500 and not_empty.json()["message"] == "Security group 'pg' is not empty\n"
    )
    missing = api.get("/cluster/firewall/groups/nosuch")
    assert missing.status_code == 500 and missing.json()["message"] == "no such security group 'nosuch'\n"


def test_guest_aliases_ipsets_and_refs(api: httpx.Client) -> None:
    fw = "/nodes/pve3/qemu/102/firewall"
    _data(api.post(f"{fw}/aliases", data={"name": "DB", "cidr": "192.0.2.10/32", "comment": "db"}))
    assert _refused(api.post(f"{fw}/aliases", data={"name": "db", "cidr": "192.0.2.11"}), "name") == (
        "alias 'db' already exists"
    )
    aliases = _data(api.get(f"{fw}/aliases"))
    assert [(a["name"], a["cidr"], a["ipversion"]) for a in aliases] == [("DB", "192.0.2.10", 4)]
    stale = api.put(f"{fw}/aliases/db", data={"cidr": "192.0.2.12", "digest": "0" * 40})
    assert stale.status_code == 500 and stale.json()["message"] == MODIFIED
    _data(api.put(f"{fw}/aliases/db", data={"cidr": "192.0.2.12", "digest": aliases[0]["digest"]}))
    assert _data(api.get(f"{fw}/aliases/db")) == {"name": "db", "cidr": "192.0.2.12", "ipversion": 4}

    _data(api.post(f"{fw}/ipset", data={"name": "backends"}))
    _data(api.post(f"{fw}/ipset/backends", data={"cidr": "198.51.100.7/24"}))  # host bits cleared
    _data(api.post(f"{fw}/ipset/backends", data={"cidr": "guest/db", "nomatch": 1}))
    assert _refused(api.post(f"{fw}/ipset/backends", data={"cidr": "0.0.0.0/0"}), "cidr") == (
        "a zero prefix is not allowed in ipset entries"
    )
    assert (
        api.post(f"{fw}/ipset/backends", data={"cidr": "dc/db"}).json()["message"] == "no such alias 'db'\n"
    )
    entries = _data(api.get(f"{fw}/ipset/backends"))
    assert [(e["cidr"], e.get("nomatch")) for e in entries] == [("198.51.100.0/24", None), ("guest/db", 1)]
    rule = {"type": "in", "action": "ACCEPT", "source": "+guest/backends", "dest": "guest/db"}
    _data(api.post(f"{fw}/rules", data=rule))
    elsewhere = api.post("/nodes/pve1/qemu/103/firewall/rules", data=rule)
    assert _refused(elsewhere, "source") == "no such ipset 'backends'"
    refs = _data(api.get(f"{fw}/refs"))
    assert {(r["scope"], r["ref"]) for r in refs} >= {
        ("dc", "+mgmt-nets"),
        ("guest", "+backends"),
        ("guest", "db"),
    }
    not_empty = api.delete(f"{fw}/ipset/backends")
    assert not_empty.status_code == 500 and not_empty.json()["message"] == "IPSet 'backends' is not empty\n"
    _data(api.delete(f"{fw}/ipset/backends", params={"force": 1}))
    assert _data(api.get(f"{fw}/ipset")) == []


def test_options_digest_and_macros(api: httpx.Client) -> None:
    options = _data(api.get("/nodes/pve1/firewall/options"))
    assert set(options) == {"digest"}
    _data(api.put("/nodes/pve1/firewall/options", data={"enable": 1, "digest": options["digest"]}))
    stale = api.put("/nodes/pve1/firewall/options", data={"enable": 0, "digest": options["digest"]})
    assert stale.status_code == 500 and stale.json()["message"] == MODIFIED
    assert _refused(api.put("/nodes/pve1/firewall/options", data={"delete": "bogus"}), "delete") == (
        "no such option 'bogus'"
    )
    assert _data(api.get("/nodes/pve1/firewall/options"))["enable"] == 1
    macros = {m["macro"]: m["descr"] for m in _data(api.get("/cluster/firewall/macros"))}
    assert macros["SSH"] == "Secure shell traffic" and macros["HTTP"] == "Hypertext Transfer Protocol (WWW)"
    assert len(macros) > 80
