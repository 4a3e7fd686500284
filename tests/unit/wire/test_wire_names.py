"""The one wire name reader (wire/names.py) against dnspython's dns.name.from_wire as the oracle."""

from __future__ import annotations

import inspect

import dns.exception
import dns.name
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gslbd.wire.names import BadName, labels_of, read_name

# dnspython >= 2.5 also refuses a pointer whose target runs into the name that points to it; older ones
# (Debian's 2.3) read such names. The reader keeps the stricter rule everywhere.
STRICT_ORACLE = "restrict_end" in inspect.getsource(dns.name.from_wire_parser)


def oracle(data: bytes, pos: int) -> tuple[bytes, int] | None:
    try:
        name, used = dns.name.from_wire(data, pos)
    except dns.exception.DNSException:
        return None
    return name.to_wire() or b"", pos + used


def ours(data: bytes, pos: int) -> tuple[bytes, int] | None:
    try:
        return read_name(data, pos)
    except BadName:
        return None


def agree(data: bytes, pos: int) -> None:
    mine, theirs = ours(data, pos), oracle(data, pos)
    if mine is not None or STRICT_ORACLE:
        assert mine == theirs, (data.hex(), pos)


LABEL = st.binary(min_size=0, max_size=70).map(lambda b: bytes((len(b),)) + b)
POINTER = st.integers(0, 0x3FFF).map(lambda p: bytes((0xC0 | p >> 8, p & 0xFF)))
SMALL_POINTER = st.integers(0, 60).map(lambda p: bytes((0xC0, p)))
PIECE = st.one_of(LABEL, POINTER, SMALL_POINTER, st.sampled_from([b"\x00", b"\x40", b"\x80", b"\xbf"]))


@st.composite
def messages(draw: st.DrawFn) -> tuple[bytes, int]:
    """Bytes made of labels, pointers (mostly into the bytes themselves), roots and junk, and where to
    start reading."""
    data = b"".join(draw(st.lists(PIECE, max_size=20)))
    if draw(st.booleans()):
        data = draw(st.binary(max_size=12)) + data
    return data, draw(st.integers(0, max(0, len(data))))


@st.composite
def compressed(draw: st.DrawFn) -> tuple[bytes, int]:
    """Names written one after another, each ending in the root or a pointer to where an earlier one (or
    one of its labels) starts, as a compressing writer does, sometimes with a byte of it changed."""
    data = bytearray(draw(st.binary(max_size=12)))
    starts: list[int] = []
    for _ in range(draw(st.integers(1, 6))):
        start = len(data)
        for label in draw(st.lists(st.binary(min_size=1, max_size=63), max_size=4)):
            starts.append(len(data))
            data += bytes((len(label),)) + label
        if starts and draw(st.booleans()):
            target = draw(st.sampled_from(starts))
            data += bytes((0xC0 | target >> 8, target & 0xFF))
        else:
            data += b"\x00"
        starts.append(start)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    return bytes(data), draw(st.sampled_from(starts))


@settings(max_examples=3000, database=None, deadline=None)
@given(case=st.one_of(messages(), compressed()))
def test_the_reader_reads_what_dnspython_reads_and_refuses_what_it_refuses(case: tuple[bytes, int]) -> None:
    data, pos = case
    agree(data, pos)


@settings(max_examples=1000, database=None, deadline=None)
@given(data=st.binary(max_size=300), pos=st.integers(0, 300))
def test_random_bytes_read_as_dnspython_reads_them(data: bytes, pos: int) -> None:
    agree(data, pos)


@settings(max_examples=500, database=None, deadline=None)
@given(labels=st.lists(st.binary(min_size=1, max_size=63), max_size=8))
def test_a_valid_name_reads_back_with_its_case_and_labels(labels: list[bytes]) -> None:
    wire = b"".join(bytes((len(label),)) + label for label in labels) + b"\x00"
    if len(wire) > 255:
        with pytest.raises(BadName, match="longer than 255"):
            read_name(wire, 0)
        return
    assert read_name(b"\xaa" + wire + b"tail", 1) == (wire, 1 + len(wire))
    assert labels_of(wire) == tuple(labels)


@pytest.mark.parametrize(
    ("data", "pos", "reason"),
    [
        (b"\x03abc", 0, "runs past the end"),
        (b"\x03ab", 0, "label runs past the end"),
        (b"\x41" + b"a" * 65 + b"\x00", 0, "unknown label type"),
        (b"\x03abc\xc0", 0, "pointer runs past the end"),
        (b"\x03abc\xc0\x00", 0, "does not point backwards"),  # a loop onto its own start
        (b"\x00\x00\x01a\xc0\x06", 2, "does not point backwards"),  # forward
        (b"\x01a\xc0\x00", 0, "does not point backwards"),
        (b"\x01a\x01b\xc0\x00", 2, "runs past the end"),  # the target runs into the pointing name
    ],
)
def test_malformed_names_are_refused_with_the_rule_they_break(data: bytes, pos: int, reason: str) -> None:
    with pytest.raises(BadName, match=reason):
        read_name(data, pos)
    if STRICT_ORACLE:
        assert oracle(data, pos) is None


def test_a_pointer_to_a_zero_byte_in_the_header_is_the_root() -> None:
    # The question of issue 19: the final root label is a pointer to ANCOUNT's first (zero) byte.
    header = b"\x12\x34\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    data = header + b"\x03www\x07example\xc0\x06" + b"\x00\x06\x00\x01"
    assert read_name(data, 12) == (b"\x03www\x07example\x00", 26)
    assert oracle(data, 12) == (b"\x03www\x07example\x00", 26)


def test_a_chain_of_more_than_16_pointers_is_refused() -> None:
    data = b"\x00" + bytes((0xC0, 0)) + b"".join(bytes((0xC0, 1 + 2 * i)) for i in range(17))
    with pytest.raises(BadName, match="more than 16"):
        read_name(data, len(data) - 2)
    assert read_name(data, 1 + 2 * 15)[0] == b"\x00"  # 16 pointers
    assert oracle(data, len(data) - 2) is None
