"""Random and mutated packets: handle() never raises, answers with well-formed responses or drops, with
the C table and without it (C against the slow path byte for byte: tests/unit/wire/test_ctable.py)."""

from __future__ import annotations

import random

import dns.edns
import dns.message
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_support import make_view, query

from gslbd.wire import Responder, compile_table, slow_response

VIEW = make_view()
SEEDS = [
    query("app.gslb.example.com."),
    query("App.gslb.example.com.", "AAAA", edns=0),
    query("sticky.gslb.example.com.", ecs="10.1.2.0/24"),
    query(
        "sticky.gslb.example.com.", ecs="2001:db8:1::/48", options=(dns.edns.CookieOption(b"abcdefgh", b""),)
    ),
    query("nope.gslb.example.com.", "TXT", edns=0, dnssec_ok=True),
    query("www.example.net.", "MX"),
    query("gslb.example.com.", "NS", edns=0, payload=512),
    query("big.gslb.example.com.", edns=0, payload=600),
    query("x.deep.inner.gslb.example.com.", "ANY"),
    query("alias.gslb.example.com.", "CNAME", edns=1),
]
# A mutation: (kind, position, value, bytes); positions wrap around the packet's length.
Mutation = tuple[str, int, int, bytes]
MUTATION: st.SearchStrategy[Mutation] = st.tuples(
    st.sampled_from(["flip", "cut", "splice", "insert", "set"]),
    st.integers(0, 4095),
    st.integers(0, 4095),
    st.binary(min_size=1, max_size=8),
)


def mutate(packet: bytes, ops: list[Mutation]) -> bytes:
    """Bit flips, truncations, splices of (the tail of) another valid query, insertions, byte sets."""
    data = bytearray(packet)
    for kind, position, value, blob in ops:
        at = position % (len(data) + 1)
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << (value % 8)
        elif kind == "cut":
            del data[at:]
        elif kind == "splice":
            other = SEEDS[value % len(SEEDS)]
            data[at:] = other[blob[0] % (len(other) + 1) :]
        elif kind == "insert":
            data[at:at] = blob
        elif kind == "set" and at < len(data):
            data[at] = value % 256
    return bytes(data)


def check_response(packet: bytes, out: bytes | None) -> None:
    """A response is either None (dropped) or a parseable response to this packet."""
    if out is None:
        assert len(packet) < 12 or packet[2] & 0x80
        return
    assert isinstance(out, bytes)
    msg = dns.message.from_wire(out)
    assert out[:2] == packet[:2]
    assert msg.flags & 0x8000


@settings(max_examples=300)
@given(packet=st.binary(max_size=600), tcp=st.booleans())
def test_random_packets_never_raise(packet: bytes, tcp: bool) -> None:
    table = compile_table(VIEW, max_udp_payload=1232, use_client_subnet=True)
    responder = Responder(table, VIEW, random.Random(1))
    check_response(packet, responder.handle(packet, 0x0A000001, False, tcp))


@settings(max_examples=500)
@given(
    seed=st.integers(0, len(SEEDS) - 1),
    ops=st.lists(MUTATION, min_size=1, max_size=5),
    tcp=st.booleans(),
    use_client_subnet=st.booleans(),
)
def test_mutated_queries_never_raise_with_or_without_the_c_table(
    seed: int, ops: list[Mutation], tcp: bool, use_client_subnet: bool
) -> None:
    packet = mutate(SEEDS[seed], ops)
    table = compile_table(VIEW, max_udp_payload=1232, use_client_subnet=use_client_subnet)
    slow = slow_response(
        packet,
        VIEW,
        0x0A000001,
        False,
        tcp=tcp,
        max_udp_payload=1232,
        use_client_subnet=use_client_subnet,
        rng=random.Random(5),
        seq=0,
    )
    check_response(packet, slow)
    for native in (False, True):
        responder = Responder(table, VIEW, random.Random(5), native=native)
        check_response(packet, responder.handle(packet, 0x0A000001, False, tcp))
