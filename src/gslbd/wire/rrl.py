"""Response rate limiting (RRL) with the semantics of BIND and Knot.

Every UDP response is put in a bucket keyed by (client network, response kind, name):
  - the client network is the source address cut to `ipv4_prefix_length` / `ipv6_prefix_length`;
  - the kind and name follow the response: an answer (rcode NOERROR, records in the answer section)
    counts against `responses_per_second` under the question name and type; every denial is counted
    under the zone (the owner of the first authority record: the SOA of a negative answer), so that
    random names below one zone share one bucket whatever the question:
      NXDOMAIN, and a compact denial of a name (RFC 9824: NOERROR whose NSEC lists NXNAME), against
      `nxdomains_per_second`;
      NODATA (NOERROR, no answer records) against `responses_per_second`, in a bucket of its own;
    every other rcode (REFUSED, SERVFAIL, FORMERR, ...) against `errors_per_second` under no name.
A bucket is a token bucket: it gains `rate` tokens a second up to `rate` (one second of burst), a
response takes one. Without a token the response is limited and the balance keeps falling, down to
`-window * rate`: a source that keeps flooding stays limited, and one that stops is answered again
within `window` seconds. Of the limited responses every `slip`th is sent truncated (TC=1, no records:
smaller than the query, and a real client retries over TCP, which is never limited); the others are
dropped. `slip` 0 drops them all, 1 truncates them all. Source addresses in `exempt` are never limited
(each address is checked, not its network).

The table of buckets is bounded: when it reaches `MAX_BUCKETS`, buckets that are full again (idle for
longer than a window) are swept out, and if that frees too little the table starts afresh.
The decision reads only the response bytes (names with wire/names.py), so it serves the Python fast
and slow paths alike.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable

from gslbd.model.config import RrlConfig
from gslbd.wire.names import BadName, name_end, read_name

MAX_BUCKETS = 100_000


# What `decide` returns (plain ints: enum members cost an attribute lookup per query).
SEND = 0
DROP = 1
SLIP = 2  # send a truncated (TC=1) response instead
# Response kinds, part of a bucket's key.
RESPONSE = 0
NXDOMAIN = 1
ERROR = 2
NODATA = 3
_NSEC = 47
_NXNAME = 128  # RFC 9824: type bit 128 is byte 16 of window 0, its high bit
_NOT_READ = (b"", False)


def denial_of(reply: bytes) -> tuple[bytes, bool]:
    """(the zone of a negative response: the owner of its first authority record, lower-cased, or b""
    when there is none; whether an NSEC of the authority section lists NXNAME: a compact denial of the
    name). A response that cannot be read is (b"", False)."""
    authority = reply[8] << 8 | reply[9]
    if not authority:
        return _NOT_READ
    try:
        pos = 12
        for _ in range(reply[4] << 8 | reply[5]):
            pos = name_end(reply, pos) + 4
        for _ in range(reply[6] << 8 | reply[7]):  # an in-zone CNAME chain may come first
            pos = name_end(reply, pos)
            pos += 10 + (reply[pos + 8] << 8 | reply[pos + 9])
        zone, pos = read_name(reply, pos)
        nxname = False
        for index in range(authority):
            if index:
                pos = name_end(reply, pos)
            end = pos + 10 + (reply[pos + 8] << 8 | reply[pos + 9])
            if reply[pos] == 0 and reply[pos + 1] == _NSEC and not nxname:
                at = name_end(reply, pos + 10)  # the next owner name, then the type bitmaps
                while at + 2 <= end:
                    window, size = reply[at], reply[at + 1]
                    if window == 0 and size > 16 and reply[at + 18] & 0x80:
                        nxname = True
                        break
                    at += 2 + size
            pos = end
        return zone.lower(), nxname
    except (IndexError, BadName):
        return _NOT_READ


def question_key(reply: bytes) -> bytes:
    """A response's bucket key for its question: the bytes up to the first zero octet and the two after
    it, lower-cased, b"" without a question. That is the name and type of every question whose labels
    hold no zero octet (and a question in a response is never compressed); another shares a bucket with
    the names it begins like: harmless, and no name has to be read on the way of every answer."""
    if not (reply[4] or reply[5]):
        return b""
    return reply[12 : reply.find(0, 12) + 3].lower()


class _Exempt:
    """Membership of addresses in the exempt networks."""

    __slots__ = ("_nets",)

    def __init__(self, cidrs: tuple[str, ...]) -> None:
        nets = [ipaddress.ip_network(c, strict=False) for c in cidrs]
        self._nets = [(n.version == 6, int(n.network_address), int(n.netmask)) for n in nets]

    def __contains__(self, item: tuple[int, bool]) -> bool:
        ip, v6 = item
        return any(nv6 == v6 and ip & mask == net for nv6, net, mask in self._nets)


class RateLimiter:
    """The buckets of one process; `decide(reply, ip, v6)` for every UDP response about to be sent.
    `clock` gives monotonic seconds (a FakeClock's `monotonic` in tests).

    A bucket is kept as one number, its "theoretical arrival time" (the generic cell rate algorithm,
    equivalent to the token bucket above): `tat` = now + 1 s - balance / rate. A response is sent when
    tat <= now + 1 s - 1 / rate (a token is left) and moves tat on by 1 / rate; a limited one moves it
    on too, up to now + 1 s + window (the debt floor); a bucket with tat <= now is full and the same
    as no bucket. One float per bucket, updated in place: the per-query cost stays small.
    """

    __slots__ = (
        "_buckets",
        "_clock",
        "_exempt",
        "_exempt_known",
        "_intervals",
        "_rates",
        "_shift4",
        "_shift6",
        "_slip",
        "_slips",
        "_tolerances",
        "_window",
        "config",
        "dropped",
        "limited",
        "slipped",
    )

    def __init__(self, config: RrlConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._rates = (
            config.responses_per_second,
            config.nxdomains_per_second,
            config.errors_per_second,
            config.responses_per_second,  # NODATA: BIND's nodata-per-second defaults to this
        )
        # Per kind: seconds one response moves tat on, and how far ahead of now tat may be for a response
        # to be sent (a second's worth less one response; a nanosecond of slack for float sums).
        self._intervals = tuple(1.0 / rate if rate else 0.0 for rate in self._rates)
        self._tolerances = tuple(1.0 - interval + 1e-9 for interval in self._intervals)
        self._window = config.window
        self._slip = config.slip
        self._shift4 = 32 - config.ipv4_prefix_length
        self._shift6 = 128 - config.ipv6_prefix_length
        self._exempt = _Exempt(config.exempt) if config.exempt else None
        self._exempt_known: dict[tuple[int, bool], bool] = {}
        # key -> [theoretical arrival time] (a one-item list: updated in place, the key hashed once)
        self._buckets: dict[tuple[int, bool, int, bytes], list[float]] = {}
        self._slips: dict[tuple[int, bool, int, bytes], int] = {}  # key -> limited responses, for slip
        self.limited = 0  # responses over the rate (dropped + slipped)
        self.dropped = 0
        self.slipped = 0

    def __len__(self) -> int:
        return len(self._buckets)

    def decide(self, reply: bytes, ip: int, v6: bool) -> int:
        """SEND this response, DROP it, or SLIP (send it truncated)."""
        if reply[3] & 15 or not (reply[6] or reply[7]):  # an error or a denial
            return self._decide_other(reply, ip, v6)
        rate = self._rates[RESPONSE]
        if not rate:
            return SEND
        if self._exempt is not None and self._is_exempt(ip, v6):
            return SEND
        prefix = ip >> self._shift6 if v6 else ip >> self._shift4
        key = (prefix, v6, RESPONSE, question_key(reply))
        now = self._clock()
        cell = self._buckets.get(key)
        if cell is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._sweep(now)
            self._buckets[key] = [now + self._intervals[RESPONSE]]
            return SEND
        tat = cell[0]
        if tat < now:
            cell[0] = now + self._intervals[RESPONSE]
            return SEND
        if tat - now <= self._tolerances[RESPONSE]:
            cell[0] = tat + self._intervals[RESPONSE]
            return SEND
        return self._limited(key, cell, now, RESPONSE)

    def _decide_other(self, reply: bytes, ip: int, v6: bool) -> int:
        """Denials (a bucket per zone) and errors (one bucket per client network)."""
        rcode = reply[3] & 15
        name = b""
        if rcode in (0, 3):
            zone, nxname = denial_of(reply)
            kind = NXDOMAIN if rcode == 3 or nxname else NODATA
            # No authority record to name the zone (never in gslbd's own denials): the question.
            name = zone or question_key(reply)
        else:
            kind = ERROR
        rate = self._rates[kind]
        if not rate:
            return SEND
        if self._exempt is not None and self._is_exempt(ip, v6):
            return SEND
        prefix = ip >> self._shift6 if v6 else ip >> self._shift4
        key = (prefix, v6, kind, name)
        now = self._clock()
        cell = self._buckets.get(key)
        if cell is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._sweep(now)
            cell = self._buckets[key] = [now]
        tat = cell[0] if cell[0] > now else now
        if tat - now <= self._tolerances[kind]:
            cell[0] = tat + self._intervals[kind]
            return SEND
        return self._limited(key, cell, now, kind)

    def _is_exempt(self, ip: int, v6: bool) -> bool:
        """Whether the source address is in an exempt network: each address is checked (remembered in a
        bounded table), never decided for its whole RRL prefix by the first address seen."""
        assert self._exempt is not None
        exempt = self._exempt_known.get((ip, v6))
        if exempt is None:
            exempt = (ip, v6) in self._exempt
            if len(self._exempt_known) >= MAX_BUCKETS:
                self._exempt_known.clear()
            self._exempt_known[ip, v6] = exempt
        return exempt

    def _limited(self, key: tuple[int, bool, int, bytes], cell: list[float], now: float, kind: int) -> int:
        ceiling = now + 1.0 + self._window
        tat = cell[0] + self._intervals[kind]
        cell[0] = tat if tat < ceiling else ceiling
        self.limited += 1
        slip = self._slip
        if slip:
            count = self._slips.get(key, 0) + 1
            if len(self._slips) >= MAX_BUCKETS:
                self._slips.clear()
            self._slips[key] = count
            if count % slip == 0:
                self.slipped += 1
                return SLIP
        self.dropped += 1
        return DROP

    def _sweep(self, now: float) -> None:
        """Forget full buckets (tat <= now: the same as none); start afresh when that frees less than
        a quarter of the table (a flood from many sources)."""
        buckets = self._buckets
        stale = [key for key, cell in buckets.items() if cell[0] <= now]
        if len(stale) < len(buckets) // 4:
            buckets.clear()
            self._slips.clear()
            return
        for key in stale:
            del buckets[key]
            self._slips.pop(key, None)
