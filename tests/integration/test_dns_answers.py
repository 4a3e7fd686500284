"""Every promise of "DNS answers" in behaviour.md, end to end against a real gslbd process (dnspython)."""

from __future__ import annotations

import socket
import struct
import time

import dns.edns
import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import pytest
from dns_config import BIG_COUNT, ZONE
from gslbd_harness import Running

A, AAAA, SOA, NS, TXT, CNAME = (
    dns.rdatatype.from_text(t) for t in ("A", "AAAA", "SOA", "NS", "TXT", "CNAME")
)


def rrset_texts(section: list[dns.rrset.RRset]) -> list[tuple[str, str, int, str]]:
    """(owner, type, ttl, rdata) of every record, in wire order."""
    return [
        (rrset.name.to_text(), dns.rdatatype.to_text(rrset.rdtype), rrset.ttl, rd.to_text())
        for rrset in section
        for rd in rrset
    ]


def soa_authority(reply: dns.message.Message) -> list[tuple[str, str, int, str]]:
    return rrset_texts(reply.authority)


# Negative answers: the SOA's TTL is min(its TTL 30, negative_ttl 45); MINIMUM is 300 (zonemaster).
SOA_NEG = [(ZONE, "SOA", 30, f"ns1.{ZONE} hostmaster.example.com. 1 14400 3600 604800 300")]


def raw_header(ident: int, flags: int, qd: int) -> bytes:
    return struct.pack("!HHHHHH", ident, flags, qd, 0, 0, 0)


def question(name: str, rtype: int) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split("."))
    return labels + b"\x00" + struct.pack("!HH", rtype, 1)


# ---- authority, flags, refusal ----


def test_answers_from_a_served_zone_are_authoritative_without_recursion(server: Running) -> None:
    reply = server.ask(f"app.{ZONE}", "A")
    assert reply.rcode() == dns.rcode.NOERROR
    assert reply.flags & dns.flags.AA
    assert not reply.flags & dns.flags.RA


def test_recursion_desired_is_echoed_but_never_available(server: Running) -> None:
    query = dns.message.make_query(f"app.{ZONE}", A)  # RD set
    reply = server.udp(query)
    assert reply.flags & dns.flags.RD
    assert not reply.flags & dns.flags.RA


def test_a_name_outside_every_served_zone_is_refused(server: Running) -> None:
    for name in ("example.org.", "www.example.com.", "."):
        reply = server.ask(name, "A")
        assert reply.rcode() == dns.rcode.REFUSED, name
        assert not reply.flags & dns.flags.AA
        assert reply.answer == []


# ---- apex ----


def test_apex_soa(server: Running) -> None:
    reply = server.ask(ZONE, "SOA")
    assert rrset_texts(reply.answer) == [
        (ZONE, "SOA", 30, f"ns1.{ZONE} hostmaster.example.com. 1 14400 3600 604800 300")
    ]
    assert reply.flags & dns.flags.AA


def test_apex_ns_comes_with_glue_for_in_zone_nameservers_only(server: Running) -> None:
    reply = server.ask(ZONE, "NS")
    assert sorted(rd[3] for rd in rrset_texts(reply.answer)) == [
        "ns.example.net.",
        f"ns1.{ZONE}",
        f"ns2.{ZONE}",
    ]
    assert sorted(rrset_texts(reply.additional)) == [
        (f"ns1.{ZONE}", "A", 30, "192.0.2.53"),
        (f"ns2.{ZONE}", "AAAA", 30, "2001:db8::53"),
    ]


# ---- services ----


def test_a_service_answers_its_addresses_with_the_service_ttl(server: Running) -> None:
    reply = server.ask(f"app.{ZONE}", "A")
    assert sorted(rrset_texts(reply.answer)) == [
        (f"app.{ZONE}", "A", 20, "192.0.2.1"),
        (f"app.{ZONE}", "A", 20, "192.0.2.2"),
    ]


def test_round_robin_puts_each_endpoint_first_equally_often(server: Running) -> None:
    firsts = [server.ask(f"app.{ZONE}", "A").answer[0][0].to_text() for _ in range(10)]
    assert firsts.count("192.0.2.1") == 5
    assert firsts.count("192.0.2.2") == 5


def test_aaaa_answers_the_ipv6_endpoints(server: Running) -> None:
    reply = server.ask(f"dual.{ZONE}", "AAAA")
    assert rrset_texts(reply.answer) == [(f"dual.{ZONE}", "AAAA", 30, "2001:db8::10")]


@pytest.mark.parametrize("rtype", ["A", "AAAA", "CNAME"])
def test_hostname_endpoints_are_answered_as_a_cname(server: Running, rtype: str) -> None:
    reply = server.ask(f"alias.{ZONE}", rtype)
    assert reply.rcode() == dns.rcode.NOERROR
    assert rrset_texts(reply.answer) == [(f"alias.{ZONE}", "CNAME", 30, "target.example.net.")]


def test_static_records_are_served_as_written(server: Running) -> None:
    assert rrset_texts(server.ask(f"info.{ZONE}", "TXT").answer) == [
        (f"info.{ZONE}", "TXT", 30, '"hello from gslbd"')
    ]
    assert rrset_texts(server.ask(f"www.{ZONE}", "CNAME").answer) == [
        (f"www.{ZONE}", "CNAME", 30, f"app.{ZONE}")
    ]


# ---- negative answers ----


@pytest.mark.parametrize("rtype", ["AAAA", "MX", "TXT", "HTTPS", "SVCB", "SRV", "CAA"])
def test_an_existing_name_without_the_type_is_nodata_with_the_soa(server: Running, rtype: str) -> None:
    reply = server.ask(f"app.{ZONE}", rtype)
    assert reply.rcode() == dns.rcode.NOERROR
    assert reply.answer == []
    assert soa_authority(reply) == SOA_NEG
    assert reply.flags & dns.flags.AA


def test_a_missing_name_is_nxdomain_with_the_soa(server: Running) -> None:
    for name in (f"nope.{ZONE}", f"x.app.{ZONE}", f"a.b.c.{ZONE}"):
        reply = server.ask(name, "A")
        assert reply.rcode() == dns.rcode.NXDOMAIN, name
        assert reply.answer == []
        assert soa_authority(reply) == SOA_NEG
        assert reply.flags & dns.flags.AA


def test_an_empty_non_terminal_is_nodata_not_nxdomain(server: Running) -> None:
    assert server.ask(f"leaf.deep.{ZONE}", "A").answer[0][0].to_text() == "192.0.2.20"
    reply = server.ask(f"deep.{ZONE}", "A")
    assert reply.rcode() == dns.rcode.NOERROR
    assert reply.answer == []
    assert soa_authority(reply) == SOA_NEG


# ---- question handling ----


def test_the_question_is_echoed_with_its_original_letter_case(server: Running) -> None:
    for tcp in (False, True):
        name = "ApP.GsLb.ExAmPlE.CoM."
        query = dns.message.make_query(name, A)
        reply = server.tcp(query) if tcp else server.udp(query)
        assert reply.question[0].name.to_text() == name
        assert {rd.to_text() for rd in reply.answer[0]} == {"192.0.2.1", "192.0.2.2"}
        nx = server.udp(dns.message.make_query("NoPe.GSLB.example.COM.", A))
        assert nx.question[0].name.to_text() == "NoPe.GSLB.example.COM."


def test_opcodes_other_than_query_get_notimp(server: Running) -> None:
    for opcode in (dns.opcode.IQUERY, dns.opcode.STATUS, dns.opcode.UPDATE):
        query = dns.message.make_query(f"app.{ZONE}", A)
        query.set_opcode(opcode)
        reply = dns.message.from_wire(server.send_raw_udp(query.to_wire()) or b"")
        assert reply.id == query.id
        assert reply.rcode() == dns.rcode.NOTIMP, dns.opcode.to_text(opcode)
        assert dns.opcode.from_flags(reply.flags) == opcode
        assert reply.flags & dns.flags.QR


@pytest.mark.parametrize(
    ("label", "packet"),
    [
        pytest.param("no question", raw_header(0x1234, 0, 0), id="no question"),
        pytest.param(
            "two questions",
            raw_header(0x1234, 0, 2) + question(f"app.{ZONE}", 1) + question(f"geo.{ZONE}", 1),
            id="two questions",
        ),
        pytest.param("truncated name", raw_header(0x1234, 0, 1) + b"\x03app\x04gsl", id="truncated name"),
        pytest.param("no type and class", raw_header(0x1234, 0, 1) + b"\x03app\x00", id="no type and class"),
        pytest.param(
            "label pointer loop",
            raw_header(0x1234, 0, 1) + b"\xc0\x0c" + struct.pack("!HH", 1, 1),
            id="label pointer loop",
        ),
    ],
)
def test_a_malformed_question_with_a_readable_header_gets_formerr(
    server: Running, label: str, packet: bytes
) -> None:
    data = server.send_raw_udp(packet)
    assert data is not None, label
    ident, flags = struct.unpack("!HH", data[:4])
    assert ident == 0x1234
    assert flags & 0x8000  # QR
    assert flags & 0x000F == dns.rcode.FORMERR, label


@pytest.mark.parametrize(
    ("label", "packet"),
    [
        pytest.param(
            "shorter than a header",
            b"\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00",
            id="shorter than a header",
        ),
        pytest.param(
            "a response (QR set)",
            raw_header(0x1234, 0x8000, 1) + question(f"app.{ZONE}", 1),
            id="a response (QR set)",
        ),
        pytest.param("empty", b"", id="empty"),
    ],
)
def test_unreadable_packets_and_responses_are_dropped(server: Running, label: str, packet: bytes) -> None:
    assert server.send_raw_udp(packet, timeout=0.3) is None, label
    assert server.ask(f"app.{ZONE}", "A").rcode() == dns.rcode.NOERROR


# ---- EDNS ----


def test_an_edns_query_gets_an_opt_record_and_a_plain_query_does_not(server: Running) -> None:
    with_edns = server.ask(f"app.{ZONE}", "A", use_edns=0, payload=4096)
    assert with_edns.edns == 0
    assert with_edns.payload >= 512
    plain = server.ask(f"app.{ZONE}", "A", use_edns=False)
    assert plain.edns == -1


def test_edns_version_above_zero_gets_badvers(server: Running) -> None:
    reply = server.ask(f"app.{ZONE}", "A", use_edns=1)
    assert reply.rcode() == dns.rcode.BADVERS
    assert reply.edns == 0
    assert reply.answer == []


def test_a_too_large_udp_answer_is_truncated_to_the_limit_and_complete_over_tcp(server: Running) -> None:
    name = f"big.{ZONE}"
    for use_edns, payload, limit in ((False, 0, 512), (0, 900, 900), (0, 4096, 1232)):
        query = dns.message.make_query(name, AAAA, use_edns=use_edns, payload=payload or 512)
        data = server.send_raw_udp(query.to_wire())
        assert data is not None
        assert len(data) <= limit, (use_edns, payload)
        reply = dns.message.from_wire(data, ignore_trailing=True, raise_on_truncation=False)
        assert reply.flags & dns.flags.TC, (use_edns, payload)
    full = server.ask(name, "AAAA", tcp=True, use_edns=0, payload=1232)
    assert not full.flags & dns.flags.TC
    assert len(rrset_texts(full.answer)) == BIG_COUNT


def test_an_answer_that_fits_is_not_truncated(server: Running) -> None:
    reply = server.ask(f"app.{ZONE}", "A", use_edns=False)
    assert not reply.flags & dns.flags.TC
    assert len(rrset_texts(reply.answer)) == 2


# ---- EDNS Client Subnet ----


def ecs_of(reply: dns.message.Message) -> dns.edns.ECSOption:
    found = [o for o in reply.options if isinstance(o, dns.edns.ECSOption)]
    assert len(found) == 1, reply.options
    return found[0]


@pytest.mark.parametrize(("subnet", "expected"), [("10.1.0.0", "192.0.2.31"), ("10.2.0.0", "198.51.100.32")])
def test_ecs_locates_the_client_and_echoes_the_source_prefix_as_scope(
    server: Running, subnet: str, expected: str
) -> None:
    reply = server.ask(f"geo.{ZONE}", "A", use_edns=0, options=[dns.edns.ECSOption(subnet, 16)])
    assert [rd[3] for rd in rrset_texts(reply.answer)] == [expected]
    ecs = ecs_of(reply)
    assert (ecs.address, ecs.srclen, ecs.scopelen) == (subnet, 16, 16)


def test_ecs_scope_is_zero_when_the_answer_does_not_depend_on_location(server: Running) -> None:
    reply = server.ask(f"app.{ZONE}", "A", use_edns=0, options=[dns.edns.ECSOption("10.2.0.0", 16)])
    ecs = ecs_of(reply)
    assert (ecs.address, ecs.srclen, ecs.scopelen) == ("10.2.0.0", 16, 0)


def test_without_ecs_the_packet_source_locates_the_client(server: Running) -> None:
    reply = server.ask(f"geo.{ZONE}", "A", use_edns=0)
    assert not [o for o in reply.options if isinstance(o, dns.edns.ECSOption)]
    # 127.0.0.1 is in no topology network: geo falls back to every candidate.
    assert sorted(rd[3] for rd in rrset_texts(reply.answer)) == ["192.0.2.31", "198.51.100.32"]


# ---- ANY, zone transfers ----


def test_any_gets_a_minimal_answer_of_one_rrset(server: Running) -> None:
    for name in (f"dual.{ZONE}", ZONE):
        reply = server.ask(name, "ANY")
        assert reply.rcode() == dns.rcode.NOERROR
        assert len(reply.answer) == 1, name
    dual = server.ask(f"dual.{ZONE}", "ANY")
    assert dns.rdatatype.to_text(dual.answer[0].rdtype) in ("A", "AAAA")


@pytest.mark.parametrize("rtype", ["AXFR", "IXFR"])
def test_zone_transfers_are_refused(server: Running, rtype: str) -> None:
    query = dns.message.make_query(ZONE, dns.rdatatype.from_text(rtype))
    reply = server.tcp(query)
    assert reply.rcode() == dns.rcode.REFUSED


# ---- TCP ----


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    (size,) = struct.unpack("!H", exactly(2))
    return exactly(size)


def test_tcp_answers_several_pipelined_queries_on_one_connection_in_order(server: Running) -> None:
    names = [f"app.{ZONE}", f"nope.{ZONE}", f"dual.{ZONE}", ZONE]
    queries = [dns.message.make_query(n, A) for n in names]
    with socket.create_connection((server.host, server.port), timeout=3) as s:
        s.sendall(b"".join(struct.pack("!H", len(w)) + w for w in (q.to_wire() for q in queries)))
        replies = [dns.message.from_wire(read_frame(s)) for _ in queries]
        again = dns.message.make_query(f"geo.{ZONE}", A)
        wire = again.to_wire()
        s.sendall(struct.pack("!H", len(wire)) + wire)
        later = dns.message.from_wire(read_frame(s))
    assert [r.id for r in replies] == [q.id for q in queries]
    assert [r.rcode() for r in replies] == [dns.rcode.NOERROR, dns.rcode.NXDOMAIN, dns.rcode.NOERROR, 0]
    assert later.id == again.id


def test_tcp_idle_timeout_closes_the_connection(server: Running) -> None:
    with socket.create_connection((server.host, server.port), timeout=5) as s:
        wire = dns.message.make_query(f"app.{ZONE}", A).to_wire()
        s.sendall(struct.pack("!H", len(wire)) + wire)
        read_frame(s)
        started = time.monotonic()
        assert s.recv(1) == b""  # tcp_idle_timeout: 1s in the config
        waited = time.monotonic() - started
    assert 0.7 < waited < 3.0


# ---- IPv6 transport ----


def test_ipv6_listener_answers_over_udp_and_tcp(server: Running) -> None:
    if "::1" not in server.hosts:
        pytest.skip("no ::1 on this machine")
    for tcp in (False, True):
        reply = server.ask(f"dual.{ZONE}", "AAAA", tcp=tcp, host="::1")
        assert rrset_texts(reply.answer) == [(f"dual.{ZONE}", "AAAA", 30, "2001:db8::10")]
        assert reply.flags & dns.flags.AA
