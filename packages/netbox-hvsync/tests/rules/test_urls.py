"""SPEC 5.2.5: "The target URL or IP is canonicalized before the first request: authority injection and
userinfo, path, query or fragment syntax are rejected; DNS names and IP values are validated; IPv6
literals are bracketed." """

import json
from pathlib import Path

import pytest
from netbox_hvsync.rules.urls import (
    CanonicalTarget,
    TargetError,
    backend_url_target,
    canonical_host,
    canonicalize_target,
    parse_port,
    resolve_host,
    resolve_target,
    url_names_port,
)


@pytest.mark.parametrize(
    ("value", "port", "expected"),
    [
        ("https://Backend.Example.:8800", None, "https://backend.example:8800"),
        ("backend.example", 8800, "https://backend.example:8800"),
        ("http://backend.example/", None, "http://backend.example:80"),
        ("10.0.0.5", 8800, "https://10.0.0.5:8800"),
        ("fd00::5", 8800, "https://[fd00::5]:8800"),
        ("[FD00:0::5]:8800", None, "https://[fd00::5]:8800"),
        ("https://[fd00::5]", 8443, "https://[fd00::5]:8443"),
        ("https://backend.example", None, "https://backend.example:443"),
        ("10.0.0.5:8800", None, "https://10.0.0.5:8800"),
        ("HTTPS://backend.example:8800", "8800", "https://backend.example:8800"),
    ],
)
def test_canonical_forms(value: str, port: int | None, expected: str) -> None:
    """DNS names and IP values are validated and normalised; IPv6 literals are bracketed."""
    assert canonicalize_target(value, port).base_url == expected


def test_ipv6_is_bracketed_in_authority_but_host_is_bare() -> None:
    target = canonicalize_target("::1", 8800)
    assert target == CanonicalTarget("https", "::1", 8800)
    assert target.authority == "[::1]:8800"


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("https://user:pw@backend.example", "user information"),
        ("https://user@backend.example", "user information"),
        ("https://backend.example@evil.example", "user information"),
        ("https://backend.example/api", "path"),
        ("https://backend.example/?x=1", "path"),
        ("https://backend.example?x=1", "query or fragment"),
        ("https://backend.example#frag", "query or fragment"),
        ("https://backend.example\\@evil.example", "backslash"),
        ("https://back end.example", "whitespace"),
        ("https://backend.example\r\nHost: evil", "control"),
        ("https://backend%2eexample", "percent"),
        ("https://[fe80::1%25eth0]:8800", "percent"),
        ("ftp://backend.example", "scheme"),
        ("https://-bad-.example", "neither a valid DNS name"),
        ("https://10.0.0.300", "neither a valid DNS name"),
        ("https://" + "a" * 64 + ".example", "neither a valid DNS name"),
        ("https://fd00::5", "bracketed"),
        ("", "required"),
        ("https://backend.example:0", "between 1 and 65535"),
        ("https://backend.example:99999", "valid URL authority"),
    ],
)
def test_rejected_targets_name_the_field(value: str, fragment: str) -> None:
    """Authority injection and userinfo, path, query or fragment syntax are rejected."""
    with pytest.raises(TargetError) as info:
        canonicalize_target(value, 8800)
    assert info.value.field == "url"
    assert fragment in str(info.value)


def test_port_conflict_and_range_name_port() -> None:
    with pytest.raises(TargetError) as info:
        canonicalize_target("https://backend.example:8800", 9000)
    assert info.value.field == "port"
    for bad in (0, 70000, "x", True):
        with pytest.raises(TargetError) as info:
            canonicalize_target("backend.example", bad)
        assert info.value.field == "port"


def test_resolved_host_prefers_domain_then_ip() -> None:
    """SPEC 4.5 rule 1: "resolved target equals (domain, else ip_address) plus port"."""
    assert resolve_host("NetBox.Example.", "10.0.0.1/24") == "netbox.example"
    assert resolve_host("", "10.0.0.1/24") == "10.0.0.1"
    assert resolve_host(None, "2001:DB8::1/64") == "2001:db8::1"
    assert resolve_host("", "") is None
    assert canonical_host("not a host!") is None


def test_resolved_target_needs_host_and_parseable_port() -> None:
    """SPEC 4.5 rule 1: "both sides must resolve a host and a parseable port"."""
    assert resolve_target("netbox.example", None, "443") == ("netbox.example", 443)
    assert resolve_target("netbox.example", None, None) is None
    assert resolve_target("netbox.example", None, "https") is None
    assert resolve_target("", None, 443) is None


@pytest.mark.parametrize(
    ("url", "names_port"),
    [
        ("https://h:8800", True),
        ("https://h", False),
        ("h:99999", True),
        ("https://[fd00::1]", False),
        ("https://[fd00::1]:8800", True),
        ("https://h/x:1", False),
        ("https://h?x=:1", False),
        ("https://h:²", True),
    ],
)
def test_url_names_port_never_raises(url: str, names_port: bool) -> None:
    assert url_names_port(url) is names_port


def test_backend_url_target_lets_the_url_port_win_and_names_the_url_field() -> None:
    assert backend_url_target("https://h:9000", 8800).port == 9000
    assert backend_url_target("https://h", 8800).port == 8800
    for url in ("https://h:99999", "https://h:²", "https://h:0", "https://[fd00::1]:70000"):
        with pytest.raises(TargetError) as info:
            backend_url_target(url, 8800)
        assert info.value.field == "url", url
    for text in ("²", "\u0663", "\uff18\uff10"):
        with pytest.raises(TargetError):
            parse_port(text)


CORPUS = json.loads((Path(__file__).parents[1] / "hostile-urls.json").read_text())
HOSTILE = [(kind, url) for kind, urls in CORPUS.items() if not kind.startswith("_") for url in urls]


def test_the_hostile_corpus_is_big_enough() -> None:
    assert len(HOSTILE) >= 50


@pytest.mark.parametrize(("kind", "url"), HOSTILE)
def test_every_hostile_url_is_refused_naming_the_field(kind: str, url: str) -> None:
    with pytest.raises(TargetError) as info:
        backend_url_target(url, 8800)
    assert info.value.field == "url", (kind, url)
    assert url.strip() not in info.value.message or len(url.strip()) < 4  # refusals do not echo the input


def test_bare_ipv6_literals_keep_the_separate_port() -> None:
    """`url_names_port` took the colons of "fd00::5" for a port, so the record's port was ignored."""
    assert backend_url_target("fd00::5", 8800).base_url == "https://[fd00::5]:8800"
    assert backend_url_target("10.0.0.5", 8800).base_url == "https://10.0.0.5:8800"
    assert backend_url_target("[fd00::5]:9000", 8800).base_url == "https://[fd00::5]:9000"


SSRF = CORPUS["server-side request forgery"]


@pytest.mark.parametrize("url", SSRF)
def test_ssrf_hosts_are_refused_as_endpoint_domains_or_ips(url: str) -> None:
    """Issue 39: the host of every SSRF URL is refused as an inventory or Proxmox endpoint's domain/IP too,
    naming the field."""
    from urllib.parse import urlsplit

    from netbox_hvsync.rules.urls import check_endpoint_host

    host = urlsplit(url).hostname if "://" in url else url
    assert host
    for field in ("domain", "ip_address"):
        with pytest.raises(TargetError) as info:
            check_endpoint_host(host, field)
        assert info.value.field == field, (url, host)


@pytest.mark.parametrize("url", CORPUS["_loopback_allowed"])
def test_loopback_stays_allowed(url: str) -> None:
    """SPEC 2.3: the inventory push substitutes a loopback IP; a backend on the NetBox host is supported."""
    from urllib.parse import urlsplit

    from netbox_hvsync.rules.urls import check_endpoint_host

    assert backend_url_target(url, 8800).base_url == url
    host = urlsplit(url).hostname

    assert check_endpoint_host(host, "domain") == host


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("pve.example.net", "pve.example.net"),
        ("0x10.example", "0x10.example"),
        ("10.0.0.5", "10.0.0.5"),
        ("fd00::5", "fd00::5"),
        ("", None),
    ],
)
def test_ordinary_endpoint_hosts_pass(value: str, expected: str | None) -> None:
    from netbox_hvsync.rules.urls import check_endpoint_host

    assert check_endpoint_host(value, "domain") == expected
