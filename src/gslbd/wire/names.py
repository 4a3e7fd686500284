"""The one reader of DNS names in wire form, for every module that reads message bytes by hand.

`read_name(data, pos)` reads the name at `pos`: its labels (RFC 1035 3.1) and compression pointers
(RFC 1035 4.1.4), with the rules dnspython's `dns.name.from_wire` applies, so that a name is read here
exactly when dnspython reads it, and read the same:
  - a label is at most 63 octets (a length byte of 0x40-0xBF is an unknown label type);
  - a pointer points strictly before the start of the piece of the name that holds it, and the piece it
    points to must end before that start: no loop, no forward pointer, no overlap with the name itself;
  - at most 16 pointers in one name;
  - the name, uncompressed, is at most 255 octets (length bytes and the root included);
  - nothing is read past the end of `data`.
It returns the uncompressed wire form with the letter case as sent (callers lower-case it with
`bytes.lower`, ASCII only, as DNS compares names) and the offset just after the name where it began (after
the first pointer when there is one). Any breach raises `BadName` (a ValueError).
"""

from __future__ import annotations

MAX_NAME = 255  # octets of an uncompressed name (RFC 1035 2.3.4)
MAX_LABEL = 63
MAX_POINTERS = 16  # as dnspython's MAX_COMPRESSION_POINTER_CHAIN


class BadName(ValueError):
    """A name that cannot be read: the reason says which rule it breaks."""


def read_name(data: bytes, pos: int) -> tuple[bytes, int]:
    """(the name at `pos` uncompressed, in the case sent; the offset just after it at `pos`)."""
    limit = len(data)  # the piece being read must end before this
    start = pos  # where the piece being read starts
    size = 1  # octets of the name so far, the root label included
    parts: list[bytes] | None = None  # the pieces before the last pointer, when there is one
    end = -1  # the offset after the first pointer
    hops = 0
    while True:
        if pos >= limit:
            raise BadName("a name runs past the end of the message")
        length = data[pos]
        if not length:
            break
        if length <= MAX_LABEL:
            size += length + 1
            pos += length + 1
            if pos > limit:
                raise BadName("a label runs past the end of the message")
            if size > MAX_NAME:
                raise BadName("a name longer than 255 octets")
            continue
        if length < 0xC0:
            raise BadName(f"an unknown label type (0x{length:02x})")
        if pos + 1 >= limit:
            raise BadName("a compression pointer runs past the end of the message")
        target = (length & 0x3F) << 8 | data[pos + 1]
        if target >= start:
            raise BadName("a compression pointer that does not point backwards")
        hops += 1
        if hops > MAX_POINTERS:
            raise BadName("more than 16 compression pointers in a name")
        if parts is None:
            parts = []
            end = pos + 2
        parts.append(data[start:pos])
        limit = start  # the piece pointed to ends before the piece that points to it
        start = pos = target
    if parts is None:
        return data[start : pos + 1], pos + 1
    parts.append(data[start : pos + 1])
    return b"".join(parts), end


def name_end(data: bytes, pos: int) -> int:
    """The offset just after the (valid) name at `pos`; BadName as `read_name`."""
    if pos < len(data) and not data[pos]:  # the root (an OPT record's owner): nothing to read
        return pos + 1
    return read_name(data, pos)[1]


def labels_of(wire: bytes) -> tuple[bytes, ...]:
    """The labels of an uncompressed wire name (as `read_name` returns it), without the root."""
    out = []
    pos = 0
    while wire[pos]:
        out.append(wire[pos + 1 : pos + 1 + wire[pos]])
        pos += 1 + wire[pos]
    return tuple(out)
