"""dnstap messages (dnstap.proto, a protobuf schema) encoded by hand: the few fields gslbd fills in.

    Dnstap  { identity = 1 (bytes), version = 2 (bytes), message = 14 (Message), type = 15 (MESSAGE = 1) }
    Message { type = 1 (AUTH_QUERY = 1, AUTH_RESPONSE = 2), socket_family = 2 (INET = 1, INET6 = 2),
              socket_protocol = 3 (UDP = 1, TCP = 2), query_address = 4 (4 or 16 bytes),
              query_port = 6 (varint), query_time_sec = 8 (varint), query_time_nsec = 9 (fixed32),
              query_message = 10 (bytes), response_time_sec = 12 (varint), response_time_nsec = 13 (fixed32),
              response_message = 14 }

Fields are written in field-number order. query_port is the client's port where the transport knows it
(the C UDP loop and the TCP listener); the Python query path hands the handler only the client's address
(server/handler.py), so its entries carry port 0 and leave the field out (the schema makes every Message
field but `type` optional). The server's own address and port (response_address, response_port) are left
out.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

AUTH_QUERY = 1
AUTH_RESPONSE = 2
NS = 1_000_000_000

_FIXED32 = struct.Struct("<I")
_FRAME_LENGTH = struct.Struct(">I")  # a Frame Streams data frame's length prefix
_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    if n < 0x80:
        return _ONE_BYTE[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SIZES = 4096  # query_message (10) and response_message (14) keys with their lengths, precomputed below this
_QUERY_SIZE = [b"\x52" + varint(n) for n in range(_SIZES)]
_RESPONSE_SIZE = [b"\x72" + varint(n) for n in range(_SIZES)]


def length_delimited(field: int, data: bytes) -> bytes:
    """A bytes (or embedded message) field: key, length, data."""
    return varint(field << 3 | 2) + varint(len(data)) + data


class Encoder:
    """Builds the Dnstap payloads of one server (its identity and version go into every message). Not
    thread-safe: one writer thread uses it."""

    def __init__(self, identity: str, version: str) -> None:
        self._head = length_delimited(1, identity.encode()) + length_delimited(2, version.encode())
        # Message.type, socket_family and socket_protocol, by (message type, v6, tcp).
        self._prefix = {
            (kind, v6, tcp): bytes((0x08, kind, 0x10, 2 if v6 else 1, 0x18, 2 if tcp else 1))
            for kind in (AUTH_QUERY, AUTH_RESPONSE)
            for v6 in (False, True)
            for tcp in (False, True)
        }
        # The same for frames, by 2 * v6 + tcp: (AUTH_QUERY's, AUTH_RESPONSE's).
        self._prefixes = [
            (self._prefix[AUTH_QUERY, v6, tcp], self._prefix[AUTH_RESPONSE, v6, tcp])
            for v6 in (False, True)
            for tcp in (False, True)
        ]
        self._second = -1  # the seconds of the latest time encoded, and their varint: they rarely change
        self._second_varint = b""

    def _seconds(self, second: int) -> bytes:
        if second != self._second:
            self._second = second
            self._second_varint = varint(second)
        return self._second_varint

    def message(
        self,
        kind: int,
        ip: int,
        v6: bool,
        tcp: bool,
        query_ns: int,
        query: bytes | None,
        response_ns: int | None = None,
        response: bytes | None = None,
        port: int = 0,
    ) -> bytes:
        """One Dnstap payload. `ip`: the client's address as an int, `port` its port (0: not known, left
        out); times in nanoseconds since the epoch."""
        parts = [
            self._prefix[kind, v6, tcp],
            b"\x22\x10" + ip.to_bytes(16, "big") if v6 else b"\x22\x04" + ip.to_bytes(4, "big"),
            b"\x30" + varint(port) if port else b"",
            b"\x40",
            self._seconds(query_ns // NS),
            b"\x4d",
            _FIXED32.pack(query_ns % NS),
        ]
        if query is not None:
            parts += (b"\x52", varint(len(query)), query)
        if response_ns is not None:
            parts += (b"\x60", self._seconds(response_ns // NS), b"\x6d", _FIXED32.pack(response_ns % NS))
        if response is not None:
            parts += (b"\x72", varint(len(response)), response)
        body = b"".join(parts)
        return b"".join((self._head, b"\x72", varint(len(body)), body, b"\x78\x01"))

    def frames(
        self,
        batch: Iterable[tuple[bytes, bytes | None, int, bool, bool, int, int, int]],
        queries: bool,
        responses: bool,
    ) -> bytes:
        """The Frame Streams data frames of a batch of exchanges (query, response or None, client ip, v6,
        tcp, query time ns, response time ns, client port or 0), joined: for each, AUTH_QUERY (with
        `queries`) and AUTH_RESPONSE (with `responses`, when there was one). The same bytes as `message()`
        with a length prefix each, built from pieces cached within the batch (the address with its message
        prefix, the port, the times, the frame head by body size): this runs for every query."""
        head = self._head
        head_size = len(head) + 3  # the head, the Message key and the trailing type field
        prefixes = self._prefixes
        addresses: list[dict[int, tuple[bytes, bytes, int]]] = [{}, {}, {}, {}]
        frame_heads: dict[int, bytes] = {}
        ports: dict[int, bytes] = {0: b""}
        out: list[bytes] = []
        last_query = (
            last_response
        ) = -1  # the C loop gives a whole receive batch one time (and one reply time)
        query_time = answered = b""
        for query, response, ip, v6, tcp, query_ns, response_ns, port in batch:
            kind = 2 * v6 + tcp
            known = addresses[kind].get(ip)
            if known is None:
                address = b"\x22\x10" + ip.to_bytes(16, "big") if v6 else b"\x22\x04" + ip.to_bytes(4, "big")
                query_prefix, response_prefix = prefixes[kind]
                known = (query_prefix + address, response_prefix + address, 6 + len(address))
                addresses[kind][ip] = known
            if query_ns != last_query:
                last_query = query_ns
                second, nano = divmod(query_ns, NS)
                query_time = b"\x40" + self._seconds(second) + b"\x4d" + _FIXED32.pack(nano)
            port_field = ports.get(port)
            if port_field is None:
                port_field = ports[port] = b"\x30" + varint(port)
            fixed = known[2] + len(port_field) + len(query_time)  # type ... address, port, query time
            if queries:
                n = len(query)
                size = _QUERY_SIZE[n] if n < _SIZES else b"\x52" + varint(n)
                body = fixed + len(size) + n
                frame_head = frame_heads.get(body)
                if frame_head is None:
                    body_size = varint(body)
                    frame_head = (
                        _FRAME_LENGTH.pack(head_size + len(body_size) + body) + head + b"\x72" + body_size
                    )
                    frame_heads[body] = frame_head
                out += (frame_head, known[0], port_field, query_time, size, query, b"\x78\x01")
            if responses and response is not None:
                if response_ns != last_response:
                    last_response = response_ns
                    second, nano = divmod(response_ns, NS)
                    answered = b"\x60" + self._seconds(second) + b"\x6d" + _FIXED32.pack(nano)
                n = len(response)
                size = _RESPONSE_SIZE[n] if n < _SIZES else b"\x72" + varint(n)
                body = fixed + len(answered) + len(size) + n
                frame_head = frame_heads.get(-body)  # negative: a response's (its Message type differs)
                if frame_head is None:
                    body_size = varint(body)
                    frame_head = (
                        _FRAME_LENGTH.pack(head_size + len(body_size) + body) + head + b"\x72" + body_size
                    )
                    frame_heads[-body] = frame_head
                out += (
                    frame_head,
                    known[1],
                    port_field,
                    query_time,
                    answered,
                    size,
                    response,
                    b"\x78\x01",
                )
        return b"".join(out)


def decode_fields(data: bytes) -> dict[int, list[int | bytes]]:
    """The fields of one protobuf message (varint, fixed64, length-delimited and fixed32 wire types),
    {field number: [values]}; embedded messages stay bytes. ValueError when the bytes break the wire
    format (a truncated field, an unknown wire type)."""
    out: dict[int, list[int | bytes]] = {}
    pos, end = 0, len(data)

    def read_varint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            if pos >= end or shift > 63:
                raise ValueError(f"truncated or overlong varint at byte {pos}")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while pos < end:
        key = read_varint()
        field, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value = read_varint()
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if end - pos < size:
                raise ValueError(f"truncated fixed-size field {field} at byte {pos}")
            value = int.from_bytes(data[pos : pos + size], "little")
            pos += size
        elif wire == 2:
            size = read_varint()
            if size > end - pos:
                raise ValueError(f"field {field} of {size} bytes runs past the end at byte {pos}")
            value = data[pos : pos + size]
            pos += size
        else:
            raise ValueError(f"wire type {wire} of field {field} is not supported")
        out.setdefault(field, []).append(value)
    return out
