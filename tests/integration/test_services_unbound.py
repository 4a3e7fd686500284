"""HTTPS, SRV, wildcard services and in-zone CNAME chains through a real resolver: Unbound (stub-zone
-> gslbd on loopback) gets them from gslbd and hands them to its clients."""

from __future__ import annotations

from collections.abc import Iterator

import dns.rcode
import pytest
from gslbd_harness import Running, running_gslbd
from unbound_support import Resolver, chain, running_unbound, unbound_binary

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        unbound_binary() is None, reason="unbound is not installed (scripts/test installs it)"
    ),
]

ORIGIN = "gslb.example.com."
CONFIG = f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ORIGIN}
    nameservers: [{{name: ns1.{ORIGIN}, address: 127.0.0.1}}]
    records:
      - {{name: www, type: CNAME, value: web.{ORIGIN}}}
      - {{name: exact.apps, type: A, value: 192.0.2.200}}
services:
  - name: web
    check: none
    https: {{alpn: [h2, h3], port: 8443}}
    srv: {{name: _https._tcp, port: 8443}}
    endpoints:
      - {{address: 192.0.2.1}}
      - {{address: 192.0.2.2}}
      - {{address: "2001:db8::1"}}
  - name: sip
    check: none
    srv: {{name: _sip._udp, port: 5060}}
    endpoints:
      - {{address: sip1.example.net., priority: 1, weight: 5}}
      - {{address: sip2.example.net., priority: 2, weight: 1}}
  - name: "*.apps"
    check: none
    https: {{alpn: [h2]}}
    endpoints:
      - {{address: 198.51.100.1}}
"""


@pytest.fixture(scope="module")
def resolver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, Resolver]]:
    tmp = tmp_path_factory.mktemp("services-unbound")
    with (
        running_gslbd(tmp, CONFIG, zone=ORIGIN) as gslbd,
        running_unbound(tmp, ORIGIN, gslbd.port) as unbound,
    ):
        yield gslbd, unbound


def test_https_reaches_the_client_with_alpn_port_and_hints(resolver: tuple[Running, Resolver]) -> None:
    _, unbound = resolver
    reply = unbound.ask(f"web.{ORIGIN}", "HTTPS")
    assert reply.rcode() == dns.rcode.NOERROR
    [record] = [rd for rrset in reply.answer for rd in rrset]
    text = record.to_text()
    assert text.startswith('1 . alpn="h2,h3" port="8443"')
    assert 'ipv4hint="192.0.2.1,192.0.2.2"' in text and 'ipv6hint="2001:db8::1"' in text
    assert sorted(line.split()[-1] for line in chain(unbound.ask(f"web.{ORIGIN}", "A"))) == [
        "192.0.2.1",
        "192.0.2.2",
    ]


def test_srv_lists_the_endpoints_as_targets(resolver: tuple[Running, Resolver]) -> None:
    _, unbound = resolver
    assert chain(unbound.ask(f"_https._tcp.web.{ORIGIN}", "SRV")) == [
        f"_https._tcp.web.{ORIGIN} SRV 0 3 8443 web.{ORIGIN}"  # three address endpoints, weight 1 each
    ]
    assert chain(unbound.ask(f"_sip._udp.sip.{ORIGIN}", "SRV")) == [
        f"_sip._udp.sip.{ORIGIN} SRV 1 5 5060 sip1.example.net.",
        f"_sip._udp.sip.{ORIGIN} SRV 2 1 5060 sip2.example.net.",
    ]


def test_a_wildcard_service_answers_any_name_below_and_an_exact_name_wins(
    resolver: tuple[Running, Resolver],
) -> None:
    _, unbound = resolver
    for name in (f"one.apps.{ORIGIN}", f"two.deeper.apps.{ORIGIN}"):
        assert chain(unbound.ask(name)) == [f"{name} A 198.51.100.1"]
        https = chain(unbound.ask(name, "HTTPS"))
        assert https == [f'{name} HTTPS 1 . alpn="h2" ipv4hint="198.51.100.1"']
    assert chain(unbound.ask(f"exact.apps.{ORIGIN}")) == [f"exact.apps.{ORIGIN} A 192.0.2.200"]


def test_an_in_zone_cname_chain_arrives_whole_in_one_answer(resolver: tuple[Running, Resolver]) -> None:
    gslbd, unbound = resolver
    direct = chain(gslbd.ask(f"www.{ORIGIN}"))
    assert direct[0] == f"www.{ORIGIN} CNAME web.{ORIGIN}" and len(direct) == 3  # gslbd sends the chain
    assert chain(unbound.ask(f"www.{ORIGIN}")) == [
        f"www.{ORIGIN} CNAME web.{ORIGIN}",
        f"web.{ORIGIN} A 192.0.2.1",
        f"web.{ORIGIN} A 192.0.2.2",
    ]
