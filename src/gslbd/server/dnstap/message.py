"""dnstap messages (dnstap.proto, a protobuf schema) encoded by hand: the few fields gslbd fills in.

    Dnstap  { identity = 1 (bytes), version = 2 (bytes), message = 14 (Message), type = 15 (MESSAGE = 1) }
    Message { type = 1 (AUTH_QUERY = 1, AUTH_RESPONSE = 2), socket_family = 2 (INET = 1, INET6 = 2),
              socket_protocol = 3 (UDP = 1, TCP = 2), query_address = 4 (4 or 16 bytes),
              query_time_sec = 8 (varint), query_time_nsec = 9 (fixed32), query_message = 10 (bytes),
              response_time_sec = 12 (varint), response_time_nsec = 13 (fixed32), response_message = 14 }

Fields are written in field-number order. query_port is left out: the transports hand the handler only
the client's address (server/handler.py), and the schema makes every Message field but `type` optional.
"""

from __future__ import annotations

import struct

AUTH_QUERY = 1
AUTH_RESPONSE = 2

_FIXED32 = struct.Struct("<I")


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def length_delimited(field: int, data: bytes) -> bytes:
    """A bytes (or embedded message) field: key, length, data."""
    return varint(field << 3 | 2) + varint(len(data)) + data


class Encoder:
    """Builds the Dnstap payloads of one server (its identity and version go into every message)."""

    def __init__(self, identity: str, version: str) -> None:
        self._head = length_delimited(1, identity.encode()) + length_delimited(2, version.encode())
        # Message.type, socket_family and socket_protocol, by (message type, v6, tcp).
        self._prefix = {
            (kind, v6, tcp): bytes((0x08, kind, 0x10, 2 if v6 else 1, 0x18, 2 if tcp else 1))
            for kind in (AUTH_QUERY, AUTH_RESPONSE)
            for v6 in (False, True)
            for tcp in (False, True)
        }

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
    ) -> bytes:
        """One Dnstap payload. `ip`: the client's address as an int; times in nanoseconds since the epoch."""
        parts = [
            self._prefix[kind, v6, tcp],
            b"\x22\x10" + ip.to_bytes(16, "big") if v6 else b"\x22\x04" + ip.to_bytes(4, "big"),
            b"\x40" + varint(query_ns // 1_000_000_000),
            b"\x4d" + _FIXED32.pack(query_ns % 1_000_000_000),
        ]
        if query is not None:
            parts.append(b"\x52" + varint(len(query)) + query)
        if response_ns is not None:
            parts.append(b"\x60" + varint(response_ns // 1_000_000_000))
            parts.append(b"\x6d" + _FIXED32.pack(response_ns % 1_000_000_000))
        if response is not None:
            parts.append(b"\x72" + varint(len(response)) + response)
        body = b"".join(parts)
        return self._head + b"\x72" + varint(len(body)) + body + b"\x78\x01"
