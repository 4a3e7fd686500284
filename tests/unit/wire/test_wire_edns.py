"""EDNS(0), response size limits and EDNS Client Subnet, on the wire."""

from __future__ import annotations

import random
import struct
from dataclasses import replace

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import pytest
from wire_support import CONFIG, ORIGIN, ask, ask_wire, make_responder, query, texts

from gslbd.answer import View, build_view
from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality
from gslbd.policy.base import Location, PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.types import EndpointKind, PolicyName
from gslbd.wire import Responder

BIG = "big.gslb.example.com."
STICKY = "sticky.gslb.example.com."


def ecs_of(msg: dns.message.Message) -> list[str]:
    return [o.to_text() for o in msg.options if isinstance(o, dns.edns.ECSOption)]


def raw_ecs(family: int, source: int, scope: int, address: bytes) -> dns.edns.GenericOption:
    return dns.edns.GenericOption(
        dns.edns.OptionType.ECS, struct.pack("!HBB", family, source, scope) + address
    )


def test_opt_is_in_the_answer_only_when_the_query_had_one(responder: Responder) -> None:
    for name in ["app.gslb.example.com.", "nope.gslb.example.com.", "www.example.net."]:
        plain = ask(responder, query(name))
        assert plain.edns == -1 and plain.opt is None, name
        with_edns = ask(responder, query(name, edns=0, payload=4096))
        options = (
            () if name.endswith("example.com.") else (dns.edns.EDEOption(dns.edns.EDECode.NOT_AUTHORITATIVE),)
        )
        assert (with_edns.edns, with_edns.payload, with_edns.options) == (0, 1232, options), name


def test_the_do_bit_is_copied_into_the_opt_record(responder: Responder) -> None:
    assert ask(responder, query("app.gslb.example.com.", dnssec_ok=True)).ednsflags == dns.flags.DO
    assert ask(responder, query("app.gslb.example.com.", edns=0)).ednsflags == 0


def test_edns_version_above_zero_gets_badvers_with_an_opt_record(responder: Responder) -> None:
    msg = ask(responder, query("app.gslb.example.com.", edns=1))
    assert msg.rcode() == dns.rcode.BADVERS
    assert (msg.edns, msg.payload) == (0, 1232)
    assert dns.flags.to_text(msg.flags) == "QR RD"
    assert msg.question[0].name.to_text() == "app.gslb.example.com."
    assert msg.answer == []


def test_without_edns_answers_over_512_bytes_are_truncated(responder: Responder) -> None:
    wire = ask_wire(responder, query(BIG))
    assert wire is not None and len(wire) <= 512
    msg = dns.message.from_wire(wire)
    assert msg.flags & dns.flags.TC
    assert (msg.answer, msg.authority, msg.additional, msg.opt) == ([], [], [], None)
    assert msg.rcode() == dns.rcode.NOERROR and msg.flags & dns.flags.AA


def test_edns_answers_fit_the_smaller_of_client_payload_and_max_udp_payload() -> None:
    responder = make_responder()
    full = ask_wire(responder, query(BIG, edns=0, payload=4096))
    assert full is not None
    size = len(full)
    assert 512 < size <= 1232
    assert len(dns.message.from_wire(full).answer[0]) == 40
    # exactly at the limit fits, one byte less truncates (the OPT record is kept)
    exact = ask(make_responder(max_udp_payload=size), query(BIG, edns=0, payload=4096))
    assert not exact.flags & dns.flags.TC and len(exact.answer[0]) == 40
    small = make_responder(max_udp_payload=size - 1)
    cut = ask(small, query(BIG, edns=0, payload=4096))
    assert cut.flags & dns.flags.TC
    assert (cut.answer, cut.edns, cut.payload) == ([], 0, size - 1)
    assert ask(responder, query(BIG, edns=0, payload=size)).answer != []
    assert ask(responder, query(BIG, edns=0, payload=size - 1)).flags & dns.flags.TC


def test_a_client_payload_below_512_counts_as_512(responder: Responder) -> None:
    small = ask(responder, query("app.gslb.example.com.", edns=0, payload=100))
    assert len(small.answer[0]) == 3 and not small.flags & dns.flags.TC
    assert ask(responder, query(BIG, edns=0, payload=100)).flags & dns.flags.TC


def test_tcp_answers_are_not_size_limited(responder: Responder) -> None:
    msg = ask(responder, query(BIG), tcp=True)
    assert not msg.flags & dns.flags.TC
    assert len(msg.answer[0]) == 40


def test_ecs_address_locates_the_client_and_scope_is_the_source_prefix(responder: Responder) -> None:
    # hash policy: the answer for an ECS subnet is the answer for a client inside that subnet
    seen = set()
    for subnet in ["10.1.2.0/24", "10.9.9.0/24", "172.16.5.0/24", "192.168.77.0/24"]:
        inside = subnet.split("/")[0].rsplit(".", 1)[0] + ".77"
        via_ecs = ask(responder, query(STICKY, ecs=subnet), src="203.0.113.5")
        direct = ask(responder, query(STICKY), src=inside)
        assert texts(via_ecs) == texts(direct), subnet
        assert ecs_of(via_ecs) == [f"ECS {subnet} scope/24"]
        seen.add(texts(via_ecs)[0])
    assert len(seen) > 1  # the subnets do not all land on one endpoint


def test_ecs_over_ipv6_uses_the_v6_prefix(responder: Responder) -> None:
    msg = ask(responder, query(STICKY, ecs="2001:db8:1234:5600::/56"))
    direct = ask(responder, query(STICKY), src="2001:db8:1234:5600::1")
    assert texts(msg) == texts(direct)
    assert ecs_of(msg) == ["ECS 2001:db8:1234:5600::/56 scope/56"]


def test_ecs_scope_is_zero_when_the_answer_does_not_depend_on_location(responder: Responder) -> None:
    for name in [
        "app.gslb.example.com.",
        "solo.gslb.example.com.",
        "nope.gslb.example.com.",
        "www.example.net.",
    ]:
        msg = ask(responder, query(name, ecs="10.1.2.0/24"))
        assert ecs_of(msg) == ["ECS 10.1.2.0/24 scope/0"], name


def test_ecs_with_source_prefix_zero_uses_the_packet_source(responder: Responder) -> None:
    msg = ask(responder, query(STICKY, ecs="0.0.0.0/0"), src="10.1.2.3")
    assert texts(msg) == texts(ask(responder, query(STICKY), src="10.1.2.3"))
    assert ecs_of(msg) == ["ECS 0.0.0.0/0 scope/0"]


def test_ecs_is_ignored_and_not_echoed_when_use_client_subnet_is_off(view: View) -> None:
    responder = make_responder(view, use_client_subnet=False)
    for subnet in ["10.1.2.0/24", "172.16.5.0/24"]:
        msg = ask(responder, query(STICKY, ecs=subnet), src="192.0.2.200")
        assert texts(msg) == texts(ask(responder, query(STICKY), src="192.0.2.200"))
        assert msg.options == ()
    assert responder.slow_count == 0


@pytest.mark.parametrize(
    "option",
    [
        raw_ecs(1, 33, 0, bytes(5)),  # source prefix longer than 32
        raw_ecs(2, 129, 0, bytes(17)),  # source prefix longer than 128
        raw_ecs(1, 24, 0, bytes([10, 1, 2, 0])),  # address longer than the prefix needs
        raw_ecs(1, 24, 0, bytes([10, 1])),  # address shorter than the prefix needs
        raw_ecs(1, 20, 0, bytes([10, 1, 0x0F])),  # bits set beyond the source prefix
        raw_ecs(3, 8, 0, bytes([10])),  # unknown family
        raw_ecs(1, 24, 33, bytes([10, 1, 2])),  # scope longer than 32
        dns.edns.GenericOption(dns.edns.OptionType.ECS, b"\x00\x01\x18"),  # shorter than its fields
    ],
    ids=["v4-prefix", "v6-prefix", "long-address", "short-address", "pad-bits", "family", "scope", "short"],
)
def test_malformed_ecs_gets_formerr_with_opt_and_no_ecs(
    responder: Responder, option: dns.edns.Option
) -> None:
    msg = ask(responder, query(STICKY, options=(option,)))
    assert msg.rcode() == dns.rcode.FORMERR
    assert (msg.edns, msg.payload, msg.options) == (0, 1232, ())
    assert msg.question[0].name.to_text() == STICKY
    assert dns.flags.to_text(msg.flags) == "QR RD"


def test_two_ecs_options_get_formerr(responder: Responder) -> None:
    twice = (dns.edns.ECSOption("10.1.2.0", 24), dns.edns.ECSOption("10.1.3.0", 24))
    msg = ask(responder, query(STICKY, options=twice))
    assert msg.rcode() == dns.rcode.FORMERR and msg.options == ()


def test_cookies_and_unknown_options_are_ignored_by_the_fast_path(responder: Responder) -> None:
    cookie = dns.edns.CookieOption(b"12345678", b"")
    padding = dns.edns.GenericOption(dns.edns.OptionType.PADDING, bytes(20))
    msg = ask(responder, query("app.gslb.example.com.", options=(cookie, padding)))
    assert msg.options == () and len(msg.answer[0]) == 3
    with_ecs = ask(responder, query(STICKY, ecs="10.1.2.0/24", options=(cookie,)))
    assert ecs_of(with_ecs) == ["ECS 10.1.2.0/24 scope/24"]
    assert responder.slow_count == 0


def test_truncated_answers_keep_the_ecs_echo(view: View) -> None:
    responder = make_responder(view, max_udp_payload=600)
    msg = ask(responder, query(BIG, ecs="10.1.2.0/24"))
    assert msg.flags & dns.flags.TC and msg.answer == []
    assert ecs_of(msg) == ["ECS 10.1.2.0/24 scope/0"]


class RegionLocator:
    """Clients in 10.0.0.0/8 are in europe, everyone else in america."""

    def locate(self, ip: int, v6: bool) -> Location:
        europe = not v6 and ip >> 24 == 10
        return Location(locality=Locality(region="europe" if europe else "america"), how="test networks")


def test_geo_answers_follow_the_ecs_address_with_scope_the_source_prefix() -> None:
    name = f"geo.{ORIGIN}"
    endpoints = (
        Endpoint(name, "192.0.2.101", EndpointKind.IPV4, "eu", Locality(region="europe")),
        Endpoint(name, "192.0.2.201", EndpointKind.IPV4, "us", Locality(region="america")),
    )
    config = replace(
        CONFIG, services=(Service(name, ORIGIN, "geo", policy=PolicyName.GEO, endpoints=endpoints),)
    )
    view = build_view(config, Snapshot(), PolicyEnv(RegionLocator(), {}, random.Random(1)))
    responder = make_responder(view)
    european = ask(responder, query(name, ecs="10.20.0.0/16"), src="198.51.100.1")
    assert texts(european) == [f"{name} 30 IN A 192.0.2.101"]
    assert ecs_of(european) == ["ECS 10.20.0.0/16 scope/16"]
    american = ask(responder, query(name, ecs="198.51.100.0/24"), src="10.1.1.1")
    assert texts(american) == [f"{name} 30 IN A 192.0.2.201"]
    assert ecs_of(american) == ["ECS 198.51.100.0/24 scope/24"]
    no_ecs = ask(responder, query(name), src="10.1.1.1")
    assert texts(no_ecs) == [f"{name} 30 IN A 192.0.2.101"]
