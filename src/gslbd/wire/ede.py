"""Extended DNS Errors (RFC 8914): the option's wire form, and the one the RRL slip carries.

An EDE option is only ever sent inside our OPT record, so only to queries that had EDNS. The codes
gslbd sends, and why (docs/wire.md "Extended DNS Errors"):

| response | INFO-CODE | EXTRA-TEXT |
|---|---|---|
| REFUSED: name outside every served zone, class other than IN | 20 Not Authoritative | |
| REFUSED: AXFR, IXFR | 18 Prohibited | zone transfers are not served |
| SERVFAIL of all_down: servfail | 0 Other Error | no healthy endpoint |
| NOTAUTH for a TSIG that does not verify | 0 Other Error | the TSIG error (BADKEY, BADSIG, BADTIME) |
| TC=1 slip of response rate limiting | 0 Other Error | (none: the slip must stay smaller than the query) |

`RATE_LIMITED` is the slip's EDE, written here once; wire/guard.py puts `RATE_LIMITED_OPTION` in the
truncated response of a slip (RFC 8914 has no code for rate limiting; an EXTRA-TEXT would make the
slip larger than many queries, against the point of RRL).
"""

from __future__ import annotations

import struct

EDE_CODE = 15  # the EDNS option code of EDE
RATE_LIMITED = (0, "")  # INFO-CODE 0 "Other", no EXTRA-TEXT


def ede_option(code: int, text: str = "") -> bytes:
    """An EDE option as it goes inside an OPT record's RDATA (code, length, INFO-CODE, EXTRA-TEXT):
    byte for byte what dnspython's EDEOption writes."""
    value = struct.pack("!H", code) + text.encode("utf-8")
    return struct.pack("!HH", EDE_CODE, len(value)) + value


RATE_LIMITED_OPTION = ede_option(*RATE_LIMITED)
