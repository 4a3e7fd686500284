"""services[].https (HTTPS, type 65), services[].srv and wildcard service names, on both paths."""

from __future__ import annotations

import random

import dns.message
import dns.rcode
import pytest
from wire_support import ask, client, make_view, query, texts

from gslbd.config import check_config_text, load_config_text
from gslbd.explain import explain
from gslbd.policy.locate import build_env
from gslbd.server.build import compile_answers
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, compile_table, slow_response
from gslbd.wire import ctable as ct

ZONE = "gslb.test."
CONFIG = f"""\
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1, address: 127.0.0.2}}]
    records:
      - {{name: exact.apps, type: A, value: 192.0.2.200}}
      - {{name: www, type: CNAME, value: web.{ZONE}}}
services:
  - name: web
    https: {{alpn: [h2, h3], port: 8443}}
    srv: {{name: _https._tcp, port: 8443}}
    endpoints:
      - {{address: 192.0.2.1}}
      - {{address: 192.0.2.2, weight: 3}}
      - {{address: "2001:db8::1"}}
      - {{address: 192.0.2.9, admin: down}}
  - name: mixed
    srv: {{name: _sip._udp, port: 5060}}
    endpoints:
      - {{address: sip1.example.net., priority: 1, weight: 5}}
      - {{address: 192.0.2.7, priority: 2}}
  - name: "*.apps"
    policy: hash
    https: {{alpn: [h2]}}
    endpoints:
      - {{address: 198.51.100.1}}
      - {{address: 198.51.100.2}}
"""


def responder() -> Responder:
    cfg = load_config_text(CONFIG)
    view, table = compile_answers(cfg, Snapshot(), build_env(cfg, random.Random(1)))
    return Responder(table, view, random.Random(1))


def slow(r: Responder, wire: bytes, src: str = "203.0.113.5") -> dns.message.Message:
    ip, v6 = client(src)
    out = slow_response(
        wire,
        r.view,
        ip,
        v6,
        tcp=False,
        max_udp_payload=1232,
        use_client_subnet=True,
        rng=random.Random(1),
        seq=0,
    )
    assert out is not None
    return dns.message.from_wire(out)


def test_https_carries_alpn_port_and_the_addresses_as_hints() -> None:
    msg = ask(responder(), query(f"web.{ZONE}", "HTTPS"))
    assert texts(msg) == [
        f'web.{ZONE} 30 IN HTTPS 1 . alpn="h2,h3" port="8443" ipv4hint="192.0.2.1,192.0.2.2" '
        'ipv6hint="2001:db8::1"'
    ]
    assert texts(ask(responder(), query(f"web.{ZONE}", "A")))  # the A answer has the same addresses


def test_srv_lists_the_healthy_endpoints_with_their_priority_and_weight() -> None:
    assert texts(ask(responder(), query(f"_https._tcp.web.{ZONE}", "SRV"))) == [
        f"_https._tcp.web.{ZONE} 30 IN SRV 0 5 8443 web.{ZONE}"  # weights 1 + 3 + 1; admin down left out
    ]
    assert texts(ask(responder(), query(f"_sip._udp.mixed.{ZONE}", "SRV"))) == [
        f"_sip._udp.mixed.{ZONE} 30 IN SRV 2 1 5060 mixed.{ZONE}",
        f"_sip._udp.mixed.{ZONE} 30 IN SRV 1 5 5060 sip1.example.net.",
    ]


@pytest.mark.parametrize("name", [f"a.apps.{ZONE}", f"deep.er.apps.{ZONE}", f"X.Apps.{ZONE}"])
def test_a_wildcard_service_answers_every_name_below(name: str) -> None:
    r = responder()
    for rtype in ("A", "HTTPS", "TXT"):
        wire = query(name, rtype, edns=0)
        fast = ask(r, wire)
        assert fast.to_wire() == slow(r, wire).to_wire()
        assert fast.rcode() == dns.rcode.NOERROR
        assert all(rrset.name.to_text().lower() == name.lower() for rrset in fast.answer)
    a = texts(ask(r, query(name, "A")))
    assert len(a) == 1 and a[0].split()[-1] in ("198.51.100.1", "198.51.100.2")


def test_an_exact_name_wins_over_the_wildcard_and_the_parent_is_nodata() -> None:
    r = responder()
    assert texts(ask(r, query(f"exact.apps.{ZONE}", "A"))) == [f"exact.apps.{ZONE} 30 IN A 192.0.2.200"]
    # Below an existing name the wildcard does not apply (RFC 4592: closest encloser).
    assert ask(r, query(f"x.exact.apps.{ZONE}", "A")).rcode() == dns.rcode.NXDOMAIN
    parent = ask(r, query(f"apps.{ZONE}", "A"))
    assert parent.rcode() == dns.rcode.NOERROR and parent.answer == []


def test_wildcards_only_as_the_first_label_of_a_service() -> None:
    bad = CONFIG.replace('name: "*.apps"', 'name: "a.*.apps"')
    _, problems = check_config_text(bad, "c.yaml")
    assert any("wildcard names are supported only as the first label" in str(p) for p in problems)
    host = CONFIG.replace("      - {address: 198.51.100.2}", "      - {address: lb.example.net.}")
    _, problems = check_config_text(host, "c.yaml")
    assert any("an HTTPS record needs address endpoints" in str(p) for p in problems)


def test_explain_says_which_wildcard_answers() -> None:
    cfg = load_config_text(CONFIG)
    env = build_env(cfg, random.Random(1))
    view, _ = compile_answers(cfg, Snapshot(), env)
    text = explain(cfg, view, env, f"a.apps.{ZONE}", "A", "203.0.113.5")
    assert f"the wildcard *.apps.{ZONE} answers it" in text
    assert f"a.apps.{ZONE} 30 IN A 198.51.100." in text


def test_a_cname_to_a_service_with_https_carries_its_https_record() -> None:
    r = responder()
    wire = query(f"www.{ZONE}", "HTTPS", edns=0)
    msg = ask(r, wire)
    assert msg.to_wire() == slow(r, wire).to_wire()
    lines = texts(msg)
    assert lines[0] == f"www.{ZONE} 30 IN CNAME web.{ZONE}"
    assert lines[1].startswith(f'web.{ZONE} 30 IN HTTPS 1 . alpn="h2,h3"')


def test_a_health_driven_ttl_is_answered_alike_by_c_the_python_fast_path_and_the_slow_path() -> None:
    view = make_view()
    wire = query("adaptive.gslb.example.com.", "A", edns=0)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    answers = {
        "c": ct.build_ctable(table).native.answer(wire, 1, False, False),
        "python": Responder(table, view, random.Random(3), native=False).handle(wire, 1, False, False),
        "slow": slow_response(
            wire,
            view,
            1,
            False,
            tcp=False,
            max_udp_payload=1232,
            use_client_subnet=True,
            rng=random.Random(3),
            seq=0,
        ),
    }
    ttls = {
        path: {rrset.ttl for rrset in dns.message.from_wire(raw).answer} if raw is not None else None
        for path, raw in answers.items()
    }
    assert ttls == {"c": {8}, "python": {8}, "slow": {8}}  # wire_support.ADAPTIVE_STATUS: (3 - 1) x 5 - 2
