"""Extended DNS Errors (RFC 8914): the option's wire form, and the hook for rate-limited truncation.

An EDE option is only ever sent inside our OPT record, so only to queries that had EDNS. The codes
gslbd sends, and why (docs/wire.md "Extended DNS Errors"):

| response | INFO-CODE | EXTRA-TEXT |
|---|---|---|
| REFUSED: name outside every served zone, class other than IN | 20 Not Authoritative | |
| REFUSED: AXFR, IXFR | 18 Prohibited | zone transfers are not served |
| SERVFAIL of all_down: servfail | 0 Other Error | no healthy endpoint |
| NOTAUTH for a TSIG that does not verify | 0 Other Error | the TSIG error (BADKEY, BADSIG, BADTIME) |
| TC=1 slip of response rate limiting | 0 Other Error | rate limited, retry over TCP |

`rate_limited_truncation` is the hook for response rate limiting (the RRL "slip"): the truncated
response to a query, with the EDE when the query had EDNS, written without parsing the whole query.
"""

from __future__ import annotations

import struct

EDE_CODE = 15  # the EDNS option code of EDE
RATE_LIMITED = (0, "rate limited, retry over TCP")
_OPT = 41
_NSID = 3


def ede_option(code: int, text: str = "") -> bytes:
    """An EDE option as it goes inside an OPT record's RDATA (code, length, INFO-CODE, EXTRA-TEXT):
    byte for byte what dnspython's EDEOption writes."""
    value = struct.pack("!H", code) + text.encode("utf-8")
    return struct.pack("!HH", EDE_CODE, len(value)) + value


def rate_limited_truncation(
    data: bytes, max_udp_payload: int, ede: tuple[int, str] = RATE_LIMITED
) -> bytes | None:
    """The truncated response (TC=1, no records, not authoritative) to a query of one question
    without compression, for a response rate limiter's slip: the query's ID, RD and question, and
    our OPT record (payload `max_udp_payload`, DO echoed, the EDE) when the query had one. None when
    the packet is not such a query (then drop it)."""
    if len(data) < 17 or data[2] & 0xF8 or data[4:6] != b"\x00\x01":
        return None
    end = data.find(0, 12) + 1
    if end == 0 or end + 4 > len(data):
        return None
    rest = end + 4
    arcount = data[10] << 8 | data[11]
    flags = bytes((0x80 | 0x02 | (data[2] & 0x01), data[3] & 0x10))  # RD and CD copied
    opt = b""
    if arcount == 1 and data[6:10] == b"\x00\x00\x00\x00":
        if rest + 11 > len(data) or data[rest] or data[rest + 1 : rest + 3] != b"\x00\x29":
            return None
        do = data[rest + 7] & 0x80
        option = ede_option(*ede)
        opt = struct.pack("!BHHBBHH", 0, _OPT, max(max_udp_payload, 512), 0, 0, do << 8, len(option))
        opt += option
    return data[:2] + flags + struct.pack("!HHHH", 1, 0, 0, 1 if opt else 0) + data[12:rest] + opt
