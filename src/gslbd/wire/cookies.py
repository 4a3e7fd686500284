"""DNS cookies (RFC 7873) with interoperable server cookies (RFC 9018).

A server cookie is 16 bytes: version 1, three reserved bytes, a 32-bit timestamp (seconds, serial
arithmetic) and SipHash-2-4 of client cookie | version | reserved | timestamp | client address under a
16-byte secret. It is valid from 5 minutes in the future to one hour in the past; a valid one younger
than half an hour is echoed unchanged, an older one is replaced by a fresh one.

Hashing in Python costs tens of microseconds, so verified and issued cookies are remembered in a bounded
table (client cookie + server cookie + address -> timestamp): a client repeating its cookie costs one
dictionary lookup. The table only ever holds cookies this secret produced.

`find_cookie` locates the COOKIE option of a query, `learning_query` tells a query for a cookie alone
(RFC 7873 5.4), `add_option` appends an option to the OPT record
that ends a response; both work on wire bytes so that the fast path (and a C one) stay untouched.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from gslbd.wire.names import BadName, name_end
from gslbd.wire.siphash import siphash24

COOKIE = 10
CLIENT_LEN = 8
VERSION = 1
LIFETIME = 3600  # a server cookie older than this is not valid (RFC 9018 4.3)
FUTURE = 300  # nor one stamped further ahead than this (clock skew between the servers of one name)
RENEW = 1800  # a valid one older than this is replaced by a fresh one
CACHE_SIZE = 50_000
_OPT = 41


class Verdict(enum.IntEnum):
    """What a query's COOKIE option is."""

    NONE = 0  # no COOKIE option (or no OPT)
    CLIENT_ONLY = 1  # a client cookie alone
    VALID = 2  # a client cookie and a server cookie this server made, still valid
    INVALID = 3  # a client cookie and a server cookie that is not (or no longer) ours
    MALFORMED = 4  # a length RFC 7873 5.2.2 answers with FORMERR


def _age(stamp: int, now: int) -> int:
    """now - stamp in 32-bit serial arithmetic (negative when the stamp is in the future)."""
    diff = (now - stamp) & 0xFFFFFFFF
    return diff - 0x100000000 if diff & 0x80000000 else diff


class CookieJar:
    """Makes and checks server cookies with one secret; `wall` gives Unix seconds."""

    __slots__ = ("_cache", "_secret", "_wall")

    def __init__(self, secret: bytes, wall: Callable[[], float]) -> None:
        if len(secret) != 16:
            raise ValueError("a cookie secret is 16 bytes")
        self._secret = secret
        self._wall = wall
        self._cache: dict[bytes, int] = {}

    def server_cookie(self, client: bytes, address: bytes, stamp: int, reserved: bytes = b"\0\0\0") -> bytes:
        """The 16-byte server cookie for a client cookie and address (4 or 16 bytes) at `stamp`."""
        head = bytes((VERSION,)) + reserved + (stamp & 0xFFFFFFFF).to_bytes(4, "big")
        return head + siphash24(self._secret, client + head + address)

    def answer(self, cookie: bytes, address: bytes) -> tuple[Verdict, bytes]:
        """The verdict on a query's (well-formed) COOKIE option data and the option data to answer
        with: the client cookie and a server cookie, the same one when it is valid and fresh."""
        now = int(self._wall())
        client = cookie[:CLIENT_LEN]
        if len(cookie) > CLIENT_LEN:
            key = cookie + address
            stamp = self._cache.get(key)
            if stamp is None and len(cookie) == 24 and cookie[8] == VERSION:
                stamp = int.from_bytes(cookie[12:16], "big")
                if self.server_cookie(client, address, stamp, cookie[9:12]) != cookie[8:]:
                    stamp = None
                else:
                    self._remember(key, stamp)
            if stamp is not None:
                age = _age(stamp, now)
                if -FUTURE <= age <= LIFETIME:
                    if age < RENEW:
                        return Verdict.VALID, cookie
                    return Verdict.VALID, self._issue(client, address, now)
            verdict = Verdict.INVALID
        else:
            verdict = Verdict.CLIENT_ONLY
        return verdict, self._issue(client, address, now)

    def known_valid(self, cookie: bytes, address: bytes) -> bool:
        """Whether the option data holds a server cookie this jar issued or verified and that is still
        valid, by table lookup only (no hashing: cheap enough to ask before rate limiting)."""
        stamp = self._cache.get(cookie + address) if len(cookie) > CLIENT_LEN else None
        return stamp is not None and -FUTURE <= _age(stamp, int(self._wall())) <= LIFETIME

    def _issue(self, client: bytes, address: bytes, now: int) -> bytes:
        out = client + self.server_cookie(client, address, now)
        self._remember(out + address, now & 0xFFFFFFFF)
        return out

    def _remember(self, key: bytes, stamp: int) -> None:
        cache = self._cache
        if len(cache) >= CACHE_SIZE:
            cache.clear()  # bounded: a flood of new clients costs hashing again, never memory
        cache[key] = stamp


def address_bytes(ip: int, v6: bool) -> bytes:
    return ip.to_bytes(16 if v6 else 4, "big")


def opt_rdata(data: bytes) -> tuple[int, int] | None:
    """(start, end) of the OPT record's RDATA in a message, or None (no OPT, or a broken message)."""
    try:
        if data[10] == 0 and data[11] == 0:
            return None
        counts = [int.from_bytes(data[i : i + 2], "big") for i in (4, 6, 8, 10)]
        pos = 12
        for _ in range(counts[0]):
            pos = name_end(data, pos) + 4
        first_additional = counts[1] + counts[2]
        for index in range(first_additional + counts[3]):
            pos = name_end(data, pos)
            rtype = data[pos] << 8 | data[pos + 1]
            end = pos + 10 + (data[pos + 8] << 8 | data[pos + 9])
            if end > len(data):
                return None
            if rtype == _OPT and index >= first_additional:
                return pos + 10, end
            pos = end
    except (IndexError, BadName):
        return None
    return None


def find_cookie(data: bytes) -> tuple[Verdict, bytes]:
    """The first COOKIE option of a query (RFC 7873 5.2: later ones are ignored): NONE, MALFORMED, or
    CLIENT_ONLY with the option data (which may hold a server cookie, still to be checked)."""
    span = opt_rdata(data)
    if span is None:
        return Verdict.NONE, b""
    at, end = span
    while at + 4 <= end:
        code = data[at] << 8 | data[at + 1]
        after = at + 4 + (data[at + 2] << 8 | data[at + 3])
        if after > end:
            return Verdict.NONE, b""
        if code == COOKIE:
            size = after - at - 4
            if size != CLIENT_LEN and not 16 <= size <= 40:
                return Verdict.MALFORMED, b""
            return Verdict.CLIENT_ONLY, data[at + 4 : after]
        at = after
    return Verdict.NONE, b""


def learning_query(data: bytes) -> bool:
    """Whether a query only asks for a cookie (RFC 7873 5.4): opcode QUERY, no question and no records but
    an OPT record of EDNS version 0 with a well-formed COOKIE option. It gets NOERROR with the cookie where
    a query without a question otherwise gets FORMERR."""
    if len(data) < 12 or data[2] & 0xF8 or any(data[4:10]):
        return False
    verdict, _ = find_cookie(data)
    span = opt_rdata(data)
    return verdict == Verdict.CLIENT_ONLY and span is not None and data[span[0] - 5] == 0


def add_option(reply: bytes, code: int, value: bytes) -> bytes | None:
    """The reply with one EDNS option appended to its OPT record, when that record ends the message
    (so a TSIG-signed reply, whose TSIG comes last, is left alone: None)."""
    span = opt_rdata(reply)
    if span is None or span[1] != len(reply):
        return None
    start = span[0]
    size = len(reply) - start + 4 + len(value)
    if size > 0xFFFF:
        return None
    return b"".join(
        (
            reply[: start - 2],
            size.to_bytes(2, "big"),
            reply[start:],
            code.to_bytes(2, "big"),
            len(value).to_bytes(2, "big"),
            value,
        )
    )
