"""The exchange's hand-read replies agree with dnspython, and garbage is refused, never crashes."""

from __future__ import annotations

import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gslbd.exchange.pername import parse_heartbeat
from gslbd.exchange.wireformat import (
    AAAA,
    NOTIFY_OPCODE,
    TXT,
    A,
    BadReply,
    Reply,
    notify_message,
    question,
    read_reply,
)

NAME = "localtargets-app.gslb.test."


def reply_to(qname: str, rdtype: int, qid: int, *records: tuple[str, str, str]) -> dns.message.Message:
    query = dns.message.make_query(qname, rdtype)
    query.id = qid
    response = dns.message.make_response(query)
    response.flags |= dns.flags.AA
    for owner, rtype, rdata in records:
        response.answer.append(dns.rrset.from_text(owner, 30, "IN", rtype, rdata))
    return response


def test_the_prebuilt_query_is_what_dnspython_would_send_without_rd() -> None:
    q = question(NAME, A)
    msg = dns.message.from_wire(q.wire)
    assert (msg.id, msg.flags, msg.opcode()) == (0, 0, dns.opcode.QUERY)
    assert msg.question[0].name == dns.name.from_text(NAME)
    assert msg.question[0].rdtype == dns.rdatatype.A


def test_addresses_of_the_asked_type_at_the_asked_name_are_read() -> None:
    q = question(NAME, A)
    wire = reply_to(NAME, A, 77, (NAME, "A", "192.0.2.1"), (NAME, "A", "192.0.2.2")).to_wire()
    assert read_reply(wire, q, 77) == Reply(0, False, ("192.0.2.1", "192.0.2.2"))
    q6 = question(NAME, AAAA)
    wire6 = reply_to(NAME, AAAA, 78, (NAME, "AAAA", "2001:db8::1")).to_wire()
    assert read_reply(wire6, q6, 78) == Reply(0, False, ("2001:db8::1",))


def test_nxdomain_and_truncation_are_reported() -> None:
    q = question(NAME, A)
    msg = reply_to(NAME, A, 5)
    msg.set_rcode(dns.rcode.NXDOMAIN)
    assert read_reply(msg.to_wire(), q, 5) == Reply(3, False, ())
    msg = reply_to(NAME, A, 6)
    msg.flags |= dns.flags.TC
    assert read_reply(msg.to_wire(), q, 6).truncated


def test_a_heartbeat_txt_is_read_as_its_text() -> None:
    q = question("heartbeat-us.gslb.test.", TXT)
    wire = reply_to(
        "heartbeat-us.gslb.test.", TXT, 9, ("heartbeat-us.gslb.test.", "TXT", '"1700000000"')
    ).to_wire()
    reply = read_reply(wire, q, 9)
    assert reply.data == ("1700000000",)
    assert parse_heartbeat(reply) == 1_700_000_000.0
    assert parse_heartbeat(Reply(0, False, ("not a number",))) is None


def test_records_at_other_names_go_through_dnspython_and_are_not_taken() -> None:
    q = question(NAME, A)
    # A CNAME chain: the A record belongs to the target, not to the asked name.
    msg = reply_to(NAME, A, 11, (NAME, "CNAME", "elsewhere.test."), ("elsewhere.test.", "A", "192.0.2.9"))
    assert read_reply(msg.to_wire(), q, 11) == Reply(0, False, ())


def test_letter_case_of_the_echoed_question_does_not_matter() -> None:
    q = question(NAME, A)
    msg = reply_to(NAME.upper(), A, 12, (NAME.upper(), "A", "192.0.2.1"))
    assert read_reply(msg.to_wire(), q, 12).data == ("192.0.2.1",)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda w: w[:2] + bytes([w[2] & 0x7F]) + w[3:], "not a response"),  # QR clear
        (lambda w: b"\x00\x63" + w[2:], "wrong ID"),
        (lambda w: w[:20] + b"x" + w[21:], "another question"),
        (lambda w: w[:5], "short"),
    ],
)
def test_replies_that_do_not_answer_the_question_are_refused(change: object, why: str) -> None:
    q = question(NAME, A)
    wire = reply_to(NAME, A, 77, (NAME, "A", "192.0.2.1")).to_wire()
    with pytest.raises(BadReply):
        read_reply(change(wire), q, 77)  # type: ignore[operator]


def test_notify_message_is_an_rfc1996_notify_for_the_zone_soa() -> None:
    msg = dns.message.from_wire(notify_message("gslb.test.", 4242))
    assert (msg.id, msg.opcode(), bool(msg.flags & dns.flags.AA)) == (4242, dns.opcode.NOTIFY, True)
    assert NOTIFY_OPCODE == dns.opcode.NOTIFY
    assert (msg.question[0].name.to_text(), msg.question[0].rdtype) == ("gslb.test.", dns.rdatatype.SOA)


@given(st.binary(max_size=300))
def test_any_bytes_are_read_or_refused_but_never_crash(tail: bytes) -> None:
    q = question(NAME, A)
    head = reply_to(NAME, A, 77).to_wire()[:12] + q.section
    for data in (tail, head + tail):
        try:
            reply = read_reply(data, q, 77)
        except BadReply:
            continue
        assert all(isinstance(d, str) for d in reply.data)


@given(st.lists(st.ip_addresses(v=4).map(str), max_size=20, unique=True))
def test_the_shortcut_reads_what_dnspython_writes(addresses: list[str]) -> None:
    q = question(NAME, A)
    msg = reply_to(NAME, A, 3, *((NAME, "A", a) for a in addresses))
    assert sorted(read_reply(msg.to_wire(), q, 3).data) == sorted(addresses)
