"""Malformed input is cheap: a datagram that cannot be a valid query is answered from its bytes, before any
dnspython parsing.

`scan(data)` walks a message as dnspython reads it (names with wire/names.py, every record's header and
RDATA length, nothing after the last record) without reading any RDATA, and notes on the way what an
error response echoes: the question (QDCOUNT 1, read whole) and the first OPT record of the additional
section. A message whose walk breaks before any TSIG record is one dnspython refuses too (FormError):
its `whole` is False, and `error_response` writes what the slow path sends to a message it cannot
parse (wire/slowpath.py step 2):
  - nothing (None) to a datagram shorter than a header, or a response (QR set);
  - NOTIMP for an opcode other than QUERY, else BADVERS when the OPT record has a version above 0, else
    FORMERR; no AA; the query's ID, opcode and RD;
  - the question when it could be read (written again from the name read, never copied: the name may be
    compressed), and our OPT record (our payload size, the query's DO) when the query had one.
The slow path writes its own error responses here too, so both give the same bytes. A message with a
TSIG record is left to dnspython (the signature decides first: NOTAUTH for one that does not verify).
"""

from __future__ import annotations

import struct

from gslbd.wire.names import BadName, name_end, read_name

_OPT = 41
_TSIG = 250
_SOA = 6
_META_CLASSES = (254, 255)  # NONE, ANY
_UPDATE = 5
FORMERR, NOTIMP, BADVERS = 1, 4, 16
DO = 0x8000  # in the OPT record's TTL
_RR = struct.Struct("!HHIH")
_COUNTS = struct.Struct("!HHHH")
_TYPE_CLASS = struct.Struct("!HH")


# What the walk over a message found, as a plain tuple (made for every message the fast paths leave):
#   whole: every section read and nothing after it (or a TSIG record reached: dnspython decides);
#   question: the question to echo (name uncompressed, type, class), b"" when there is none;
#   opt: (class: the payload size, TTL) of the first OPT record of the additional section, or None.
Scan = tuple[bool, bytes, tuple[int, int] | None]
_SHORT: Scan = (False, b"", None)


def scan(data: bytes) -> Scan:
    """Walk the message; see the module's docstring."""
    size = len(data)
    if size < 12:
        return _SHORT
    qdcount, ancount, nscount, arcount = _COUNTS.unpack_from(data, 4)
    question = b""
    opt: tuple[int, int] | None = None
    pos = 12
    try:
        for _ in range(qdcount):
            name, end = read_name(data, pos)
            pos = end + 4
            if pos > size:
                return _SHORT
            if qdcount == 1 and ((data[2] >> 3) & 0xF != _UPDATE or _zone_question(data, end)):
                question = name + data[end:pos]
        first_additional = ancount + nscount
        for index in range(first_additional + arcount):
            pos = name_end(data, pos)
            if pos + 10 > size:
                return False, question, opt
            rtype, rclass, ttl, rdlen = _RR.unpack_from(data, pos)
            if index >= first_additional:
                if rtype == _TSIG:
                    return True, question, opt
                if rtype == _OPT and opt is None:
                    opt = (rclass, ttl)
            pos += 10 + rdlen
            if pos > size:
                return False, question, opt
    except BadName:
        return False, question, opt
    return pos == size, question, opt


def _zone_question(data: bytes, end: int) -> bool:
    """Whether dnspython reads an UPDATE's question (its zone) alone: of type SOA, not in a meta class."""
    rtype, rclass = _TYPE_CLASS.unpack_from(data, end)
    return rtype == _SOA and rclass not in _META_CLASSES


def error_response(data: bytes, found: Scan, max_udp_payload: int) -> bytes | None:
    """The error response to a message that cannot be parsed (see the module's docstring)."""
    if len(data) < 12 or data[2] & 0x80:
        return None
    _, question, opt = found
    if data[2] & 0x78:
        rcode = NOTIMP
    elif opt is not None and (opt[1] >> 16) & 0xFF:
        rcode = BADVERS
    else:
        rcode = FORMERR
    flags = bytes((0x80 | (data[2] & 0x79), (data[3] & 0x10) | (rcode & 0xF)))  # QR, opcode, RD; CD
    counts = struct.pack("!HHHH", 1 if question else 0, 0, 0, 0 if opt is None else 1)
    record = b""
    if opt is not None:
        record = b"\x00" + _RR.pack(_OPT, max_udp_payload, (rcode >> 4) << 24 | (opt[1] & DO), 0)
    return b"".join((data[:2], flags, counts, question, record))
