"""Extended DNS Errors (RFC 8914): which responses carry which code, only with EDNS, on both paths."""

from __future__ import annotations

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdataclass
import pytest
from wire_support import ORIGIN, ask, fast_and_slow, query

from gslbd.wire import Responder


def edes(msg: dns.message.Message) -> list[tuple[int, str | None]]:
    return [(int(o.code), o.text) for o in msg.options if isinstance(o, dns.edns.EDEOption)]


def same_on_both_paths(responder: Responder, wire: bytes) -> dns.message.Message:
    return dns.message.from_wire(fast_and_slow(responder, wire, fast_only=False))


def test_refused_outside_our_zones_says_not_authoritative(responder: Responder) -> None:
    msg = same_on_both_paths(responder, query("www.example.net.", edns=0))
    assert msg.rcode() == dns.rcode.REFUSED and edes(msg) == [(20, None)]
    assert responder.slow_count == 0


def test_no_ede_without_edns(responder: Responder) -> None:
    msg = ask(responder, query("www.example.net."))
    assert msg.rcode() == dns.rcode.REFUSED and msg.edns == -1


@pytest.mark.parametrize("name", [ORIGIN, f"app.{ORIGIN}", f"nope.{ORIGIN}", "www.example.net."])
def test_zone_transfers_are_prohibited(responder: Responder, name: str) -> None:
    msg = same_on_both_paths(responder, query(name, "AXFR", edns=0))
    assert msg.rcode() == dns.rcode.REFUSED
    assert edes(msg) == [(18, "zone transfers are not served")]


def test_other_classes_are_not_authoritative(responder: Responder) -> None:
    msg = ask(responder, query(f"app.{ORIGIN}", edns=0, rdclass=dns.rdataclass.HS))
    assert msg.rcode() == dns.rcode.REFUSED and edes(msg) == [(20, None)]


def test_all_down_servfail_says_why(responder: Responder) -> None:
    msg = same_on_both_paths(responder, query(f"sf.{ORIGIN}", edns=0, ecs="198.51.100.0/24"))
    assert msg.rcode() == dns.rcode.SERVFAIL
    assert edes(msg) == [(0, "no healthy endpoint")]
    assert [o.otype for o in msg.options] == [dns.edns.ECS, dns.edns.EDE]  # ECS first, as the slow path


def test_positive_and_negative_answers_carry_no_ede(responder: Responder) -> None:
    for name in (f"app.{ORIGIN}", f"nope.{ORIGIN}", f"info.{ORIGIN}"):
        assert edes(same_on_both_paths(responder, query(name, edns=0))) == []
