"""Response rate limiting (RRL) with the semantics of BIND and Knot.

Every UDP response is put in a bucket keyed by (client network, response kind, name):
  - the client network is the source address cut to `ipv4_prefix_length` / `ipv6_prefix_length`;
  - the kind and name follow the response: an answer or NODATA (rcode NOERROR) counts against
    `responses_per_second` under the question name and type; NXDOMAIN against `nxdomains_per_second`
    under the zone (the owner of the SOA in the authority section), so random names below one zone
    share a bucket; every other rcode (REFUSED, SERVFAIL, FORMERR, ...) against `errors_per_second`
    under no name at all.
A bucket is a token bucket: it gains `rate` tokens a second up to `rate` (one second of burst), a
response takes one. Without a token the response is limited and the balance keeps falling, down to
`-window * rate`: a source that keeps flooding stays limited, and one that stops is answered again
within `window` seconds. Of the limited responses every `slip`th is sent truncated (TC=1, no records:
smaller than the query, and a real client retries over TCP, which is never limited); the others are
dropped. `slip` 0 drops them all, 1 truncates them all. Sources in `exempt` are never limited.

The table of buckets is bounded: when it reaches `MAX_BUCKETS`, buckets that are full again (idle for
longer than a window) are swept out, and if that frees too little the table starts afresh.
The decision reads only the response bytes, so it serves the Python fast and slow paths alike.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable

from gslbd.model.config import RrlConfig

MAX_BUCKETS = 100_000


# What `decide` returns (plain ints: enum members cost an attribute lookup per query).
SEND = 0
DROP = 1
SLIP = 2  # send a truncated (TC=1) response instead
# Response kinds, part of a bucket's key.
RESPONSE = 0
NXDOMAIN = 1
ERROR = 2


def _name_at(data: bytes, pos: int) -> bytes:
    """The (lower-cased, uncompressed) wire name at `pos`, following compression pointers."""
    out = []
    hops = 0
    while True:
        length = data[pos]
        if length >= 0xC0:
            hops += 1
            if hops > 16:
                raise ValueError("pointer loop")
            pos = (length & 0x3F) << 8 | data[pos + 1]
            continue
        out.append(data[pos : pos + length + 1])
        if length == 0:
            return b"".join(out).lower()
        pos += length + 1


def _skip_name(data: bytes, pos: int) -> int:
    while True:
        length = data[pos]
        if length == 0:
            return pos + 1
        if length >= 0xC0:
            return pos + 2
        pos += length + 1


def zone_of_negative(reply: bytes, qend: int) -> bytes | None:
    """The owner of the first authority record (the SOA of an NXDOMAIN), or None."""
    try:
        pos = qend + 4
        for _ in range(reply[6] << 8 | reply[7]):  # an in-zone CNAME chain may come first
            pos = _skip_name(reply, pos)
            pos += 10 + (reply[pos + 8] << 8 | reply[pos + 9])
        if reply[8] == 0 and reply[9] == 0:
            return None
        return _name_at(reply, pos)
    except (IndexError, ValueError):
        return None


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
        self._rates = (config.responses_per_second, config.nxdomains_per_second, config.errors_per_second)
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
        if reply[3] & 15:
            return self._decide_other(reply, ip, v6)
        rate = self._rates[RESPONSE]
        if not rate:
            return SEND
        prefix = ip >> self._shift6 if v6 else ip >> self._shift4
        if self._exempt is not None and self._is_exempt(prefix, ip, v6):
            return SEND
        # The question name and type, lower-cased together (a type whose bytes are letters may share a
        # bucket with another: harmless).
        name = reply[12 : reply.find(0, 12) + 3].lower() if reply[5] or reply[4] else b""
        key = (prefix, v6, RESPONSE, name)
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
        """NXDOMAIN (bucket per zone) and errors (one bucket per client network)."""
        kind = NXDOMAIN if reply[3] & 15 == 3 else ERROR
        rate = self._rates[kind]
        if not rate:
            return SEND
        prefix = ip >> self._shift6 if v6 else ip >> self._shift4
        if self._exempt is not None and self._is_exempt(prefix, ip, v6):
            return SEND
        name = b""
        if kind == NXDOMAIN and (reply[4] or reply[5]):
            qend = reply.find(0, 12) + 1
            zone = zone_of_negative(reply, qend)
            name = zone if zone is not None else reply[12 : qend + 2].lower()
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

    def _is_exempt(self, prefix: int, ip: int, v6: bool) -> bool:
        assert self._exempt is not None
        exempt = self._exempt_known.get((prefix, v6))
        if exempt is None:
            exempt = (ip, v6) in self._exempt
            if len(self._exempt_known) >= MAX_BUCKETS:
                self._exempt_known.clear()
            self._exempt_known[prefix, v6] = exempt
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
