"""In-zone CNAME chains are followed in the answer (RFC 1034 4.3.2), on the fast path too, and the
negative answers' SOA has the RFC 2308 TTL and compressed names."""

from __future__ import annotations

import random
from dataclasses import replace

import dns.message
import dns.rcode
import pytest
from wire_support import (
    CONFIG,
    ORIGIN,
    ZONE,
    ask,
    fast_and_slow,
    make_responder,
    make_view,
    query,
    texts,
)

from gslbd.answer import ViewBuilder
from gslbd.answer.chain import MAX_LINKS
from gslbd.model.zone import StaticRecord
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, compile_table
from gslbd.wire.compile import update_table

SOA_NEG = f"{ORIGIN} 60 IN SOA ns1.{ORIGIN} hostmaster.example.com. 2024010101 3600 600 604800 60"


def both(responder: Responder, wire: bytes) -> bytes:
    """The fast path's response, after checking that it is the slow path's, byte for byte."""
    return fast_and_slow(responder, wire, seed=7)


def test_a_static_cname_to_a_service_carries_the_services_answer(responder: Responder) -> None:
    both(responder, query(f"www.{ORIGIN}"))
    msg = ask(responder, query(f"www.{ORIGIN}"))
    assert texts(msg)[0] == f"www.{ORIGIN} 120 IN CNAME app.{ORIGIN}"
    assert sorted(line.split()[-1] for line in texts(msg)[1:]) == ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
    # The chain's own policy keeps rotating (round robin at the target).
    again = ask(responder, query(f"www.{ORIGIN}"))
    assert texts(again)[1:] != texts(msg)[1:]


def test_a_cname_question_gets_the_cname_alone(responder: Responder) -> None:
    assert texts(ask(responder, query(f"www.{ORIGIN}", "CNAME"))) == [
        f"www.{ORIGIN} 120 IN CNAME app.{ORIGIN}"
    ]


def test_other_types_follow_the_chain_to_the_targets_records(responder: Responder) -> None:
    msg = ask(responder, query(f"to-info.{ORIGIN}", "TXT"))
    assert texts(msg) == [
        f"to-info.{ORIGIN} 120 IN CNAME info.{ORIGIN}",
        f'info.{ORIGIN} 120 IN TXT "hello"',
        f'info.{ORIGIN} 120 IN TXT "world"',
    ]
    nodata = ask(responder, query(f"to-info.{ORIGIN}", "A"))
    assert nodata.rcode() == dns.rcode.NOERROR
    assert texts(nodata) == [f"to-info.{ORIGIN} 120 IN CNAME info.{ORIGIN}"]
    assert texts(nodata, "authority") == [SOA_NEG]


def test_a_cname_to_a_missing_name_in_our_zone_is_nxdomain_with_the_chain(responder: Responder) -> None:
    msg = ask(responder, query(f"dangling.{ORIGIN}"))
    assert msg.rcode() == dns.rcode.NXDOMAIN
    assert texts(msg) == [f"dangling.{ORIGIN} 120 IN CNAME missing.{ORIGIN}"]
    assert texts(msg, "authority") == [SOA_NEG]


def test_a_chain_ending_in_servfail_is_the_cname_alone(responder: Responder) -> None:
    msg = ask(responder, query(f"to-sf.{ORIGIN}"))
    assert (msg.rcode(), texts(msg), texts(msg, "authority")) == (
        dns.rcode.NOERROR,
        [f"to-sf.{ORIGIN} 120 IN CNAME sf.{ORIGIN}"],
        [],
    )
    nx = ask(responder, query(f"to-nx.{ORIGIN}"))
    assert nx.rcode() == dns.rcode.NXDOMAIN and texts(nx, "authority") == [SOA_NEG]


def test_a_chain_crosses_into_another_of_our_zones(responder: Responder) -> None:
    msg = ask(responder, query(f"to-inner.{ORIGIN}"))
    assert texts(msg) == [
        f"to-inner.{ORIGIN} 120 IN CNAME svc.inner.{ORIGIN}",
        f"svc.inner.{ORIGIN} 20 IN A 192.0.2.70",
    ]


def test_loops_stop_and_long_chains_are_cut(responder: Responder) -> None:
    loop = ask(responder, query(f"loop1.{ORIGIN}"))
    assert loop.rcode() == dns.rcode.NOERROR
    assert texts(loop) == [
        f"loop1.{ORIGIN} 120 IN CNAME loop2.{ORIGIN}",
        f"loop2.{ORIGIN} 120 IN CNAME loop1.{ORIGIN}",
    ]
    long = ask(responder, query(f"c0.{ORIGIN}"))
    assert len(texts(long)) == MAX_LINKS and all(" CNAME " in line for line in texts(long))
    short = ask(responder, query(f"c3.{ORIGIN}"))
    assert texts(short)[-1] == f"c10.{ORIGIN} 120 IN A 192.0.2.110"


def test_hostname_endpoints_in_our_zones_are_followed_out_of_zone_ones_are_not() -> None:
    responder = make_responder(seed=1)
    seen = set()
    for _ in range(9):
        msg = ask(responder, query(f"chase.{ORIGIN}"))
        lines = texts(msg)
        seen.add(lines[0].split()[-1])
        if lines[0].endswith("lb.example.net."):
            assert len(lines) == 1
        else:
            assert len(lines) >= 2 and lines[1].startswith(lines[0].split()[-1])
    assert seen == {f"sticky.{ORIGIN}", f"shuffled.{ORIGIN}", "lb.example.net."}


def test_a_fallback_hostname_in_our_zone_is_followed(responder: Responder) -> None:
    msg = ask(responder, query(f"fbchase.{ORIGIN}"))
    assert texts(msg)[0] == f"fbchase.{ORIGIN} 20 IN CNAME app.{ORIGIN}"
    assert len(texts(msg)) == 4


@pytest.mark.parametrize(
    "name", [f"www.{ORIGIN}", f"chase.{ORIGIN}", f"c0.{ORIGIN}", f"dangling.{ORIGIN}", f"to-sticky.{ORIGIN}"]
)
def test_chains_are_answered_by_the_fast_path_with_the_slow_paths_bytes(name: str) -> None:
    for rtype in ("A", "AAAA", "TXT", "MX", "CNAME", "ANY", "HTTPS"):
        both(make_responder(), query(name, rtype))
        both(make_responder(), query(name.upper(), rtype, edns=0, ecs="198.51.100.0/24"))


def test_a_health_change_at_the_target_refollows_the_chain_incrementally() -> None:
    env = PolicyEnv(NoLocator(), {}, random.Random(1))
    builder = ViewBuilder()
    view, _ = builder.build(CONFIG, Snapshot(version=1), env)
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    app = next(s for s in CONFIG.services if s.label == "app")
    down = Snapshot(version=2, health={e.key: False for e in app.endpoints if e.address != "192.0.2.2"})
    view2, change = builder.build(CONFIG, down, env)
    assert not change.full and f"www.{ORIGIN}" in change.changed
    table2 = update_table(table, view2, change.changed, change.removed)
    msg = ask(Responder(table2, view2, random.Random(1)), query(f"www.{ORIGIN}"))
    assert texts(msg) == [f"www.{ORIGIN} 120 IN CNAME app.{ORIGIN}", f"app.{ORIGIN} 20 IN A 192.0.2.2"]


def test_negative_soa_ttl_is_the_smaller_of_the_soa_ttl_and_minimum() -> None:
    low = replace(ZONE, ttl=25)
    view = make_view(replace(CONFIG, zones=(low, *CONFIG.zones[1:])))
    responder = make_responder(view)
    for name in (f"nope.{ORIGIN}", f"info.{ORIGIN}"):  # NXDOMAIN, NODATA
        wire = both(responder, query(name, "A"))
        soa = texts(dns_message(wire), "authority")[0]
        assert soa.split()[1] == "25"
    soa = texts(ask(make_responder(), query(f"nope.{ORIGIN}")), "authority")[0]
    assert soa.split()[1] == "60"  # ttl 300, negative_ttl 60


def test_nxdomain_names_in_the_soa_are_compressed() -> None:
    responder = make_responder()
    wire = both(responder, query(f"nope.{ORIGIN}"))
    # header 12 + question 27 + SOA: owner pointer 2, fixed 10, mname "ns1"+pointer 6,
    # rname "hostmaster"+pointer to "example.com." 13, numbers 20.
    assert len(wire) == 12 + 27 + 2 + 10 + 6 + 13 + 20
    # A question below the SOA's MNAME compresses the MNAME into the question itself.
    both(responder, query(f"x.ns1.{ORIGIN}"))
    both(responder, query(f"ns1.a.{ORIGIN}"))


def dns_message(wire: bytes) -> dns.message.Message:
    return dns.message.from_wire(wire)


def test_a_cname_added_to_a_static_name_chain(responder: Responder) -> None:
    del responder
    records = (*ZONE.records, StaticRecord(f"late.{ORIGIN}", "CNAME", f"to-info.{ORIGIN}", 5))
    view = make_view(replace(CONFIG, zones=(replace(ZONE, records=records), *CONFIG.zones[1:])))
    msg = ask(make_responder(view), query(f"late.{ORIGIN}", "TXT"))
    assert texts(msg)[:2] == [
        f"late.{ORIGIN} 5 IN CNAME to-info.{ORIGIN}",
        f"to-info.{ORIGIN} 120 IN CNAME info.{ORIGIN}",
    ]
