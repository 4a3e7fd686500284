"""Unusual and malformed queries: drops, NOTIMP, FORMERR, REFUSED for other classes."""

from __future__ import annotations

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rrset
import dns.tsigkeyring
import pytest
from wire_support import ask, ask_wire, query

from gslbd.wire import Responder

APP = "app.gslb.example.com."


def with_header(wire: bytes, *, flags: int | None = None, qdcount: int | None = None) -> bytes:
    out = bytearray(wire)
    if flags is not None:
        out[2:4] = flags.to_bytes(2, "big")
    if qdcount is not None:
        out[4:6] = qdcount.to_bytes(2, "big")
    return bytes(out)


@pytest.mark.parametrize("size", range(12))
def test_packets_shorter_than_a_header_are_dropped(responder: Responder, size: int) -> None:
    assert ask_wire(responder, query(APP)[:size]) is None


def test_packets_with_qr_set_are_dropped(responder: Responder) -> None:
    answer = ask_wire(responder, query(APP))
    assert answer is not None
    assert ask_wire(responder, answer) is None
    assert ask_wire(responder, with_header(query(APP), flags=0x8100)) is None
    assert ask_wire(responder, b"\x12\x34\x80\x00" + bytes(8)) is None


@pytest.mark.parametrize(
    "opcode", [dns.opcode.IQUERY, dns.opcode.STATUS, dns.opcode.NOTIFY, dns.opcode.UPDATE, 3, 15]
)
def test_opcodes_other_than_query_get_notimp(responder: Responder, opcode: int) -> None:
    wire = with_header(query(APP, "SOA", rd=False), flags=opcode << 11)  # UPDATE needs a SOA question
    msg = ask(responder, wire)
    assert msg.rcode() == dns.rcode.NOTIMP
    assert msg.opcode() == opcode
    assert dns.flags.to_text(msg.flags) == "QR"
    assert [q.name.to_text() for q in msg.question] == [APP]


def test_notimp_for_an_unparsable_packet_with_another_opcode(responder: Responder) -> None:
    msg = ask(responder, with_header(query(APP), flags=dns.opcode.NOTIFY << 11)[:20])
    assert (msg.rcode(), msg.opcode(), msg.question) == (dns.rcode.NOTIMP, dns.opcode.NOTIFY, [])


@pytest.mark.parametrize("qdcount", [0, 2])
def test_qdcount_other_than_one_gets_formerr(responder: Responder, qdcount: int) -> None:
    wire = query(APP)
    wire = with_header(wire[:12], qdcount=0) if qdcount == 0 else with_header(wire + wire[12:], qdcount=2)
    msg = ask(responder, wire)
    assert (msg.rcode(), msg.question, msg.id) == (dns.rcode.FORMERR, [], 4242)
    assert dns.flags.to_text(msg.flags) == "QR RD"


def test_a_truncated_question_gets_formerr_with_the_header_echoed(responder: Responder) -> None:
    wire = query(APP, qid=777)
    for cut in [13, 20, len(wire) - 3, len(wire) - 1]:
        msg = ask(responder, wire[:cut])
        assert (msg.rcode(), msg.id, msg.question) == (dns.rcode.FORMERR, 777, []), cut


def test_trailing_bytes_get_formerr_with_the_question_echoed(responder: Responder) -> None:
    msg = ask(responder, query("ApP.gslb.example.com.") + b"junk")
    assert msg.rcode() == dns.rcode.FORMERR
    assert msg.question[0].name.to_text() == "ApP.gslb.example.com."


def test_bad_label_types_get_formerr(responder: Responder) -> None:
    wire = query(APP)
    bad = wire[:12] + b"\x40" + wire[13:]  # 0x40: an extended label type
    msg = ask(responder, bad)
    assert (msg.rcode(), msg.question) == (dns.rcode.FORMERR, [])


def test_a_second_opt_record_gets_formerr_with_an_opt_record(responder: Responder) -> None:
    wire = query(APP, edns=0)
    opt = wire[len(query(APP)) :]
    doubled = with_header(wire + opt, flags=0x0100)
    doubled = doubled[:10] + b"\x00\x02" + doubled[12:]
    msg = ask(responder, doubled)
    assert (msg.rcode(), msg.edns, msg.payload) == (dns.rcode.FORMERR, 0, 1232)


def test_an_unparsable_query_with_a_newer_edns_version_gets_badvers(responder: Responder) -> None:
    wire = query(APP, edns=1) + b"junk"
    msg = ask(responder, wire)
    assert msg.rcode() == dns.rcode.BADVERS and msg.edns == 0


@pytest.mark.parametrize("rdclass", [dns.rdataclass.CH, dns.rdataclass.HS, dns.rdataclass.ANY])
def test_classes_other_than_in_are_refused(responder: Responder, rdclass: int) -> None:
    msg = ask(responder, query(APP, "TXT", rdclass=rdclass))
    assert msg.rcode() == dns.rcode.REFUSED
    assert dns.flags.to_text(msg.flags) == "QR RD"
    assert msg.question[0].rdclass == rdclass


def test_queries_with_answer_records_are_answered_by_the_slow_path(responder: Responder) -> None:
    msg = dns.message.make_query(APP, "A")
    msg.answer.append(dns.rrset.from_text(APP, 30, "IN", "A", "192.0.2.200"))
    got = ask(responder, msg.to_wire())
    assert got.rcode() == dns.rcode.NOERROR and len(got.answer[0]) == 3
    assert responder.slow_count == 1


def test_a_query_signed_with_an_unknown_tsig_key_gets_notauth_with_the_question(responder: Responder) -> None:
    msg = dns.message.make_query(APP, "A")
    msg.use_tsig(dns.tsigkeyring.from_text({"key.": "c2VjcmV0c2VjcmV0"}), keyname="key.")
    got = dns.message.from_wire(ask_wire(responder, msg.to_wire()) or b"", keyring=False)
    assert got.rcode() == dns.rcode.NOTAUTH
    assert not got.answer and got.tsig is not None and got.tsig[0].error == dns.rcode.BADKEY
    assert got.question[0].name.to_text() == APP
