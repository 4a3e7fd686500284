"""Malformed input is answered before dnspython (wire/precheck.py): what the walk refuses, dnspython
refuses too, and the error response is the one the slow path rendered with dnspython before."""

from __future__ import annotations

import random
import struct

import dns.exception
import dns.message
import dns.rcode
import dns.rrset
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wire_fuzz import MUTATION, SEEDS, VIEW, Mutation, mutate
from wire_support import query

from gslbd.wire import Responder, compile_table
from gslbd.wire.precheck import error_response, scan
from gslbd.wire.render import EdnsReply, build_message, message_wire, response_flags


def dnspython_refuses(data: bytes) -> bool:
    try:
        dns.message.from_wire(data, keyring={})
    except dns.message.UnknownTSIGKey:
        return False  # NOTAUTH, not FORMERR
    except Exception:
        return True
    return False


def oracle_opt(data: bytes) -> tuple[int, int] | None:
    """The first OPT of the additional section, read with dnspython's own name reader record by record."""
    try:
        qd, an, ns, ar = struct.unpack_from("!HHHH", data, 4)
        pos = 12
        for _ in range(qd):
            pos += dns.name.from_wire(data, pos)[1] + 4
        for index in range(an + ns + ar):
            pos += dns.name.from_wire(data, pos)[1]
            rtype, rclass, ttl, rdlen = struct.unpack_from("!HHIH", data, pos)
            if rtype == 250:
                return None
            if rtype == 41 and index >= an + ns:
                return rclass, ttl
            pos += 10 + rdlen
    except (dns.exception.DNSException, struct.error):
        return None
    return None


def oracle_response(data: bytes, payload: int) -> bytes:
    """The error response as the slow path rendered it with dnspython (question_only for the question)."""
    question: list[dns.rrset.RRset] = []
    if data[4:6] == b"\x00\x01":
        try:
            question = list(dns.message.from_wire(data, question_only=True).question)
        except Exception:
            question = []
    opt = oracle_opt(data)
    qflags = int.from_bytes(data[2:4], "big")
    if qflags & 0x7800:
        rcode = dns.rcode.NOTIMP
    elif opt is not None and (opt[1] >> 16) & 0xFF:
        rcode = dns.rcode.BADVERS
    else:
        rcode = dns.rcode.FORMERR
    edns = EdnsReply(payload, opt[1] & 0x8000) if opt is not None else None
    flags = response_flags(qflags, authoritative=False)
    return message_wire(
        build_message(int.from_bytes(data[:2], "big"), flags, question, rcode=rcode, edns=edns)
    )


def check(data: bytes) -> None:
    found = scan(data)
    if found[0] or len(data) < 12 or data[2] & 0x80:
        return
    assert dnspython_refuses(data), data.hex()
    assert error_response(data, found, 1232) == oracle_response(data, 1232), data.hex()


@settings(max_examples=1500, database=None, deadline=None)
@given(seed=st.integers(0, len(SEEDS) - 1), ops=st.lists(MUTATION, min_size=1, max_size=5))
def test_what_the_walk_refuses_dnspython_refuses_and_the_error_is_the_same(
    seed: int, ops: list[Mutation]
) -> None:
    check(mutate(SEEDS[seed], ops))


@settings(max_examples=1000, database=None, deadline=None)
@given(packet=st.binary(min_size=12, max_size=300))
def test_random_bytes_get_the_error_dnspython_would_have_led_to(packet: bytes) -> None:
    check(packet)


@settings(max_examples=300, database=None, deadline=None)
@given(seed=st.integers(0, len(SEEDS) - 1))
def test_every_valid_query_passes_the_walk(seed: int) -> None:
    assert scan(SEEDS[seed])[0]


APP = "app.gslb.example.com."


@pytest.mark.parametrize(
    ("packet", "rcode", "echoed", "has_opt"),
    [
        (query(APP, edns=0) + b"junk", dns.rcode.FORMERR, True, True),
        (query(APP, edns=0)[:-3], dns.rcode.FORMERR, True, False),  # the OPT record cut short
        (query(APP, edns=1) + b"x", dns.rcode.BADVERS, True, True),
        (b"\x00\x07\x20\x00" + query(APP)[4:] + b"x", dns.rcode.NOTIMP, True, False),  # opcode 4, NOTIFY
        (
            query(APP)[:2] + b"\x00\x00\x00\x01\x00\x05\x00\x00\x00\x00" + query(APP)[12:],
            dns.rcode.FORMERR,
            True,
            False,
        ),
        (query(APP)[:12] + b"\x03app\xc0\x20\x00\x01\x00\x01", dns.rcode.FORMERR, False, False),  # forward
    ],
    ids=["trailing-junk", "cut-opt", "badvers", "notimp", "ancount-past-end", "forward-pointer"],
)
def test_broken_messages_get_their_error_before_dnspython(
    packet: bytes, rcode: int, echoed: bool, has_opt: bool
) -> None:
    responder = Responder(
        compile_table(VIEW, max_udp_payload=1232, use_client_subnet=True),
        VIEW,
        random.Random(1),
        native=False,
    )
    out = responder.handle(packet, 0x0A000001, False)
    assert out is not None and out == oracle_response(packet, 1232)
    msg = dns.message.from_wire(out)
    assert msg.rcode() == rcode and msg.id == int.from_bytes(packet[:2], "big")
    assert (len(msg.question) == 1) is echoed and (msg.edns == 0) is has_opt
    assert (responder.malformed_count, responder.slow_count) == (1, 0)


def test_short_datagrams_and_responses_are_dropped_before_dnspython() -> None:
    responder = Responder(
        compile_table(VIEW, max_udp_payload=1232, use_client_subnet=True),
        VIEW,
        random.Random(1),
        native=False,
    )
    reply = b"\x12\x34\x84\x00" + query(APP)[4:] + b"x"
    assert responder.handle(b"\x12\x34\x01", 1, False) is None
    assert responder.handle(reply, 1, False) is None
    assert (responder.malformed_count, responder.slow_count) == (2, 0)


def test_a_signed_message_is_left_to_dnspython_for_its_signature() -> None:
    msg = dns.message.make_query(APP, "A")
    msg.use_tsig({dns.name.from_text("other."): b"0123456789abcdef"}, dns.name.from_text("other."))
    wire = msg.to_wire() + b"x"  # trailing junk after the TSIG: the signature is judged first
    assert scan(wire)[0]
