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

import enum
import ipaddress
import time
from collections.abc import Callable

from gslbd.model.config import RrlConfig

MAX_BUCKETS = 100_000


class Action(enum.IntEnum):
    SEND = 0
    DROP = 1
    SLIP = 2  # send a truncated (TC=1) response instead


class Kind(enum.IntEnum):
    RESPONSE = 0
    NXDOMAIN = 1
    ERROR = 2


def _question_end(reply: bytes) -> int:
    """The offset just after the first question's name (0 when the reply has no question)."""
    if reply[4] == 0 and reply[5] == 0:
        return 0
    return reply.index(0, 12) + 1


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
    `clock` gives monotonic seconds (a FakeClock's `monotonic` in tests)."""

    __slots__ = (
        "_buckets",
        "_clock",
        "_exempt",
        "_exempt_known",
        "_rates",
        "_shift4",
        "_shift6",
        "_slip",
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
        self._window = config.window
        self._slip = config.slip
        self._shift4 = 32 - config.ipv4_prefix_length
        self._shift6 = 128 - config.ipv6_prefix_length
        self._exempt = _Exempt(config.exempt) if config.exempt else None
        self._exempt_known: dict[tuple[int, bool], bool] = {}
        # key -> [balance, last update, limited count]
        self._buckets: dict[tuple[int, bool, int, bytes], list[float]] = {}
        self.limited = 0  # responses over the rate (dropped + slipped)
        self.dropped = 0
        self.slipped = 0

    def __len__(self) -> int:
        return len(self._buckets)

    def decide(self, reply: bytes, ip: int, v6: bool) -> Action:
        """Whether to send this response, drop it, or send it truncated."""
        rcode = reply[3] & 15
        if rcode == 0:
            kind = Kind.RESPONSE
        elif rcode == 3:
            kind = Kind.NXDOMAIN
        else:
            kind = Kind.ERROR
        rate = self._rates[kind]
        if not rate:
            return Action.SEND
        prefix = ip >> self._shift6 if v6 else ip >> self._shift4
        if self._exempt is not None:
            exempt = self._exempt_known.get((prefix, v6))
            if exempt is None:
                exempt = (ip, v6) in self._exempt
                if len(self._exempt_known) >= MAX_BUCKETS:
                    self._exempt_known.clear()
                self._exempt_known[prefix, v6] = exempt
            if exempt:
                return Action.SEND
        if kind == Kind.ERROR:
            name = b""
        else:
            qend = _question_end(reply)
            zone = zone_of_negative(reply, qend) if kind == Kind.NXDOMAIN and qend else None
            # The question name and type; for NXDOMAIN the zone.
            name = zone if zone is not None else reply[12:qend].lower() + reply[qend : qend + 2]
        key = (prefix, v6, kind, name)
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._sweep(now)
            self._buckets[key] = [rate - 1.0, now, 0.0]
            return Action.SEND
        balance = bucket[0] + (now - bucket[1]) * rate
        if balance > rate:  # noqa: PLR1730 (min() is a call: slower on the query path)
            balance = rate
        bucket[1] = now
        if balance >= 1.0:
            bucket[0] = balance - 1.0
            return Action.SEND
        balance -= 1.0
        floor = -self._window * rate
        bucket[0] = balance if balance > floor else floor
        bucket[2] += 1.0
        self.limited += 1
        slip = self._slip
        if slip and bucket[2] % slip == 0:
            self.slipped += 1
            return Action.SLIP
        self.dropped += 1
        return Action.DROP

    def _sweep(self, now: float) -> None:
        """Forget buckets that have refilled (idle longer than a window and a second); start afresh when
        that frees less than a quarter of the table (a flood from many sources)."""
        horizon = now - self._window - 1.0
        buckets = self._buckets
        stale = [key for key, bucket in buckets.items() if bucket[1] < horizon]
        if len(stale) < len(buckets) // 4:
            buckets.clear()
            return
        for key in stale:
            del buckets[key]
