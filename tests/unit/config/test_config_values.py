"""Value conversions: durations, TTLs, relative names, record data, addresses."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gslbd.config import check_config_text, load_config_text
from gslbd.config.fields import Invalid, parse_duration
from gslbd.config.loader import Scalar
from gslbd.config.names import parse_hostport, target
from gslbd.model import ListenAddress, StaticRecord


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("5s", 5.0),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("1d", 86400.0),
        ("1m30s", 90.0),
        ("1.5s", 1.5),
        ("7", 7.0),
        ("0.25", 0.25),
        (" 10s ", 10.0),
    ],
)
def test_duration_text_converts_to_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5 sec", "s", "5x", "-5s", "5s5", "ms5", "1h-1m"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(Invalid) as caught:
        parse_duration(text)
    assert caught.value.message == (
        f"invalid duration {text!r}; use seconds or a number with a unit: 500ms, 5s, 2m, 1h"
    )


def test_durations_in_config_accept_numbers_and_units() -> None:
    config = load_config_text(
        """\
dns: {tcp_idle_timeout: 1.5}
checks:
  web: {type: http, interval: 1m, timeout: 500ms}
peers: {interval: 2, stale_after: 1h, timeout: 250ms, discover: ns}
"""
    )
    assert config.dns.tcp_idle_timeout == 1.5
    assert (config.checks[0].interval, config.checks[0].timeout) == (60.0, 0.5)
    assert config.peers is not None
    assert (config.peers.interval, config.peers.stale_after, config.peers.timeout) == (2.0, 3600.0, 0.25)


def test_zero_duration_is_refused_where_time_must_pass() -> None:
    _, problems = check_config_text("checks:\n  web: {type: http, interval: 0s}\n", "c.yaml")
    assert [str(p) for p in problems if p.severity == "error"] == [
        "c.yaml:2: checks.web.interval: must be longer than 0, got '0s'",
    ]


ZONE = """\
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
    records:
"""


def records_of(lines: str) -> tuple[StaticRecord, ...]:
    return load_config_text(ZONE + lines).zones[0].records


def test_relative_record_names_and_rdata_become_absolute() -> None:
    assert records_of(
        "      - {name: www, type: CNAME, value: app}\n"
        "      - {name: '@', type: MX, value: 10 mail}\n"
        "      - {name: _sip._tcp, type: SRV, value: 0 5 5060 sip}\n"
        "      - {name: Abs.Gslb.Example.Com., type: NS, value: ns.example.net.}\n"
    ) == (
        StaticRecord("www.gslb.example.com.", "CNAME", "app.gslb.example.com.", 30),
        StaticRecord("gslb.example.com.", "MX", "10 mail.gslb.example.com.", 30),
        StaticRecord("_sip._tcp.gslb.example.com.", "SRV", "0 5 5060 sip.gslb.example.com.", 30),
        StaticRecord("abs.gslb.example.com.", "NS", "ns.example.net.", 30),
    )


def test_txt_values_are_quoted_and_split_into_255_character_strings() -> None:
    long = "x" * 300
    recs = records_of(
        "      - {name: a, type: TXT, value: hello world}\n"
        "      - {name: b, type: txt, value: 'say \"hi\"'}\n"
        '      - {name: c, type: TXT, value: \'"two" "strings"\'}\n'
        f"      - {{name: d, type: TXT, value: {long}}}\n"
    )
    assert [(r.rtype, r.value) for r in recs] == [
        ("TXT", '"hello world"'),
        ("TXT", '"say \\"hi\\""'),
        ("TXT", '"two" "strings"'),
        ("TXT", f'"{"x" * 255}" "{"x" * 45}"'),
    ]


def test_a_list_of_values_makes_one_rrset_with_ttl() -> None:
    assert records_of("      - {name: www, type: A, value: [192.0.2.1, 192.0.2.2], ttl: 5m}\n") == (
        StaticRecord("www.gslb.example.com.", "A", "192.0.2.1", 300),
        StaticRecord("www.gslb.example.com.", "A", "192.0.2.2", 300),
    )


def test_a_relative_name_that_repeats_the_origin_is_warned_about() -> None:
    config, problems = check_config_text(
        ZONE + "      - {name: www.gslb.example.com, type: A, value: 192.0.2.1}\n"
    )
    assert config is not None
    assert config.zones[0].records[0].name == "www.gslb.example.com.gslb.example.com."
    assert [str(p) for p in problems] == [
        "<string>:5: zones[0].records[0].name: 'www.gslb.example.com' has no trailing dot, so it is relative "
        "and means 'www.gslb.example.com.gslb.example.com.'; write 'www.gslb.example.com.' if you meant the "
        "absolute name"
    ]


def test_service_names_resolve_against_the_most_specific_or_named_zone() -> None:
    config = load_config_text(
        """\
zones:
  - origin: example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
services:
  - {name: app.gslb.example.com., endpoints: [{address: 192.0.2.1}]}
  - {name: web, zone: example.com, endpoints: [{address: 192.0.2.2}]}
  - {name: a.b, zone: gslb.example.com., endpoints: [{address: 192.0.2.3}]}
  - {name: CDN.Example.Com., endpoints: [{address: Edge.Example.NET.}]}
"""
    )
    assert [(s.name, s.zone, s.label) for s in config.services] == [
        ("app.gslb.example.com.", "gslb.example.com.", "app"),
        ("web.example.com.", "example.com.", "web"),
        ("a.b.gslb.example.com.", "gslb.example.com.", "a.b"),
        ("cdn.example.com.", "example.com.", "cdn"),
    ]
    assert config.services[3].endpoints[0].address == "edge.example.net."


def test_endpoint_and_fallback_addresses_are_normalized() -> None:
    config = load_config_text(
        """\
zones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]
services:
  - name: app
    all_down: fallback
    fallback: ["2001:DB8:0:0::9", 192.0.2.9]
    endpoints:
      - {address: "2001:0db8::0001", probe_address: "FD00::1"}
      - {address: 192.0.2.1}
  - name: cname
    all_down: fallback
    fallback: Sorry.Example.Com.
    endpoints: [{address: 192.0.2.2}]
"""
    )
    app, cname = config.services
    assert app.fallback == ("2001:db8::9", "192.0.2.9")
    assert [(e.address, e.probe_address) for e in app.endpoints] == [
        ("2001:db8::1", "fd00::1"),
        ("192.0.2.1", None),
    ]
    assert cname.fallback == ("sorry.example.com.",)


@pytest.mark.parametrize(
    ("text", "default", "expected"),
    [
        ("127.0.0.1:5353", None, ListenAddress("127.0.0.1", 5353)),
        ("[::1]:53", None, ListenAddress("::1", 53)),
        ("[2001:DB8::1]:8053", None, ListenAddress("2001:db8::1", 8053)),
        ("127.0.0.3", 53, ListenAddress("127.0.0.3", 53)),
        ("[::1]", 53, ListenAddress("::1", 53)),
    ],
)
def test_host_and_port_parse(text: str, default: int | None, expected: ListenAddress) -> None:
    assert parse_hostport(text, default) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("127.0.0.1", "'127.0.0.1': missing ':port' (write host:port, or [v6]:port)"),
        ("::1", "'::1': write IPv6 addresses in brackets, like [::1]:53"),
        ("[::1:53", "'[::1:53': missing ']' after the IPv6 address"),
        ("[::1]53", "'[::1]53': expected ':port' after ']'"),
        ("127.0.0.1:http", "'127.0.0.1:http': port 'http' is not a number"),
        ("127.0.0.1:0", "'127.0.0.1:0': port must be between 1 and 65535"),
        ("localhost:53", "'localhost' is not an IP address"),
    ],
)
def test_bad_host_and_port_say_why(text: str, message: str) -> None:
    with pytest.raises(Invalid) as caught:
        parse_hostport(text, None)
    assert caught.value.message == message


def test_listen_accepts_one_string_and_port_zero() -> None:
    config = load_config_text("dns: {listen: '[::1]:0'}\napi: {listen: '127.0.0.1:0'}\n")
    assert config.dns.listen == (ListenAddress("::1", 0),)
    assert config.api is not None and config.api.listen == ListenAddress("127.0.0.1", 0)


@given(st.lists(st.integers(0, 300), min_size=3, max_size=5), st.booleans())
def test_endpoint_addresses_normalize_like_ipaddress(octets: list[int], zero: bool) -> None:
    """The IPv4 shortcut of `target` takes and refuses exactly what ipaddress does."""
    text = ".".join(("0" if zero and i == 0 else "") + str(o) for i, o in enumerate(octets))
    try:
        expected: str | None = str(ipaddress.ip_address(text))
    except ValueError:
        expected = None
    try:
        got: str | None = target(Scalar(1, text))[0]
    except Invalid:
        got = None
    assert got == expected
