"""What an internet-facing server does to a response after the answer is known: DNS cookies and
response rate limiting (wire/cookies.py, wire/rrl.py).

`Guard.apply(query, reply, ip, v6, tcp)` is called by `Responder.handle` for every response of either
path, and works on bytes only, so a faster (C) answer loop can call it the same way:
  1. cookies (when on): a query whose first COOKIE option is well formed gets the option back with our
     server cookie appended to the reply's OPT record (the same cookie while it is valid and fresh, a
     new one otherwise); a malformed option already got FORMERR from the slow path and gets nothing.
     A reply that would outgrow the client's UDP size with the cookie is sent truncated (TC=1).
  2. RRL (when on, UDP only): a query carrying a valid server cookie is not limited (its source address
     is proven); every other response may be sent, dropped (None) or sent truncated (TC=1) as the
     limiter decides. A truncated response carries the question, and when the query had EDNS an OPT
     with the slip's Extended DNS Error (wire/ede.py `RATE_LIMITED`) and the cookie, when there is one.
Counters are kept here (`counts()`); they reach /metrics as server events.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gslbd.model.config import CookieConfig, DnsConfig, RrlConfig
from gslbd.wire.cguard import AVAILABLE as NATIVE_AVAILABLE
from gslbd.wire.cguard import NativeGuard
from gslbd.wire.cookies import (
    COOKIE,
    CookieJar,
    Verdict,
    add_option,
    address_bytes,
    find_cookie,
    learning_query,
    opt_rdata,
)
from gslbd.wire.ede import RATE_LIMITED_OPTION
from gslbd.wire.names import BadName, name_end
from gslbd.wire.rrl import DROP, SEND, RateLimiter

_TC = 0x02  # in header byte 2
FORMERR = 1
_CLIENT_ONLY = int(Verdict.CLIENT_ONLY)


class Guard:
    """Cookies and RRL for one responder. Either part may be off (None)."""

    __slots__ = (
        "cookie_invalid",
        "cookie_new",
        "cookie_passed",
        "cookie_valid",
        "cookies",
        "max_udp_payload",
        "rrl",
        "settings",
    )

    def __init__(
        self,
        rrl: RrlConfig | None,
        cookies: CookieConfig | None,
        secret: bytes,
        *,
        max_udp_payload: int = 1232,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = (rrl, cookies, max_udp_payload)
        self.rrl = RateLimiter(rrl, monotonic) if rrl is not None else None
        jar_secret = cookies.secret if cookies is not None and cookies.secret is not None else secret
        self.cookies = CookieJar(jar_secret, wall) if cookies is not None else None
        self.max_udp_payload = max_udp_payload
        self.cookie_new = 0  # queries with only a client cookie
        self.cookie_valid = 0
        self.cookie_invalid = 0  # a server cookie that was not ours or expired: a fresh one is sent
        self.cookie_passed = 0  # UDP responses RRL let through because of a valid server cookie

    def counts(self) -> dict[str, int]:
        """Counters by event name (server events in /metrics)."""
        out: dict[str, int] = {}
        if self.rrl is not None:
            out["rrl_limited"] = self.rrl.limited
            out["rrl_dropped"] = self.rrl.dropped
            out["rrl_slipped"] = self.rrl.slipped
            out["rrl_cookie_passed"] = self.cookie_passed
        if self.cookies is not None:
            out["cookies_new"] = self.cookie_new
            out["cookies_valid"] = self.cookie_valid
            out["cookies_invalid"] = self.cookie_invalid
        return out

    def apply(self, query: bytes, reply: bytes | None, ip: int, v6: bool, tcp: bool) -> bytes | None:
        """The response to send (possibly changed), or None to send nothing."""
        if self.cookies is None:  # RRL alone: the short way (most servers, every query)
            if tcp or reply is None or len(reply) < 12:
                return reply
            assert self.rrl is not None
            action = self.rrl.decide(reply, ip, v6)
            if not action:
                return reply
            return None if action == DROP else self._truncated(reply, b"", RATE_LIMITED_OPTION)
        if reply is None or len(reply) < 12:
            return reply
        if reply[3] & 15 == FORMERR and learning_query(query):  # RFC 7873 5.4: NOERROR and the cookie
            reply = reply[:3] + bytes((reply[3] & 0xF0,)) + reply[4:]
        limiter = None if tcp else self.rrl
        if (query[10] or query[11]) and reply[3] & 15 != FORMERR:
            verdict, data = find_cookie(query)
            if verdict == _CLIENT_ONLY:
                return self._with_cookie(query, reply, data, ip, v6, tcp, limiter)
        if limiter is None:
            return reply
        return self._limit(limiter, reply, ip, v6, b"")

    def _with_cookie(
        self,
        query: bytes,
        reply: bytes,
        data: bytes,
        ip: int,
        v6: bool,
        tcp: bool,
        limiter: RateLimiter | None,
    ) -> bytes | None:
        """A query with a well-formed COOKIE option. Under RRL, a cookie we know to be valid passes;
        any other is rate limited first and hashed only when its response is not dropped, so that a
        flood of forged cookies costs no hashing."""
        assert self.cookies is not None
        address = address_bytes(ip, v6)
        action = SEND
        decided = limiter is not None and not self.cookies.known_valid(data, address)
        if decided:
            assert limiter is not None
            action = limiter.decide(reply, ip, v6)
            if action == DROP:
                return None
        verdict, cookie = self.cookies.answer(data, address)
        if verdict == Verdict.VALID:
            self.cookie_valid += 1
        elif verdict == Verdict.INVALID:
            self.cookie_invalid += 1
        else:
            self.cookie_new += 1
        with_cookie = add_option(reply, COOKIE, cookie)
        if with_cookie is not None:
            if not tcp and len(with_cookie) > self._udp_limit(query):
                return self._truncated(reply, cookie)
            reply = with_cookie
        if limiter is None:
            return reply
        if verdict == Verdict.VALID:
            self.cookie_passed += 1
            return reply
        if action == SEND:
            return reply
        return self._truncated(reply, cookie, RATE_LIMITED_OPTION)

    def _limit(self, limiter: RateLimiter, reply: bytes, ip: int, v6: bool, cookie: bytes) -> bytes | None:
        action = limiter.decide(reply, ip, v6)
        if action == SEND:
            return reply
        if action == DROP:
            return None
        return self._truncated(reply, cookie, RATE_LIMITED_OPTION)

    def _udp_limit(self, query: bytes) -> int:
        span = opt_rdata(query)
        payload = 512 if span is None else query[span[0] - 8] << 8 | query[span[0] - 7]
        payload = max(payload, 512)
        return min(payload, max(self.max_udp_payload, 512))

    def _truncated(self, reply: bytes, cookie: bytes, ede: bytes = b"") -> bytes:
        """The reply cut to its header and question with TC=1; its OPT (when it had one) keeps the
        header fields and gets the cookie and the EDE, and no other option."""
        qdcount = reply[4] << 8 | reply[5]
        try:
            qend = name_end(reply, 12) + 4 if qdcount else 12
        except BadName:  # never in a response of ours: sent without its question then
            qdcount, qend = 0, 12
        span = opt_rdata(reply)
        opt = b""
        if span is not None:
            options = ede
            if cookie:
                options += COOKIE.to_bytes(2, "big") + len(cookie).to_bytes(2, "big") + cookie
            start = span[0]
            # OPT: root name, type, class (UDP size), TTL (extended rcode, version, flags), RDLENGTH.
            opt = b"\x00" + reply[start - 10 : start - 2] + len(options).to_bytes(2, "big") + options
        counts = b"\x00\x01" if qdcount else b"\x00\x00"
        header = reply[:2] + bytes((reply[2] | _TC, reply[3])) + counts + b"\x00\x00\x00\x00"
        return b"".join((header, b"\x00\x01" if opt else b"\x00\x00", reply[12:qend], opt))


AnyGuard = Guard | NativeGuard  # the oracle in Python, or the same stages in C (wire/cguard.py)


def guard_for(
    dns: DnsConfig, current: AnyGuard | None, secret: bytes, *, native: bool = False
) -> AnyGuard | None:
    """The guard for `dns` settings: `current` when they did not change (its buckets and cookie table
    carry over), a new one when they did, None when both RRL and cookies are off. `native`: the C guard
    (a stage of the C answer path, wire/cguard.py) where the extension is compiled."""
    if dns.rrl is None and dns.cookies is None:
        return None
    native = native and NATIVE_AVAILABLE
    if (
        current is not None
        and current.settings == (dns.rrl, dns.cookies, dns.max_udp_payload)
        and isinstance(current, NativeGuard) == native
    ):
        return current
    kind = NativeGuard if native else Guard
    return kind(dns.rrl, dns.cookies, secret, max_udp_payload=dns.max_udp_payload)
