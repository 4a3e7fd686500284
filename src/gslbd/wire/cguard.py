"""Cookies and RRL as stages of the C answer path (wire/_guard.c), with the interface of wire/guard.py.

`NativeGuard` holds one `_cfast.Guard`: the buckets, the cookie table and the counters of a responder. The
C table it is given to (`Table.set_guard`) applies it to every answer C makes, in the UDP loops without
the GIL; `apply` applies the same object to what Python answers (the slow path, the exchange hook, TCP),
so every response of the responder goes through one state and the counters stay exact. wire/guard.py's
`Guard` is the oracle: tests/unit/wire/test_cguard.py holds the two to the same bytes and counts.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from gslbd.model.config import CookieConfig, RrlConfig

try:
    from gslbd.wire import _cfast
except ImportError:  # not compiled here: wire/guard.py's Guard serves
    _cfast = None  # type: ignore[assignment]

AVAILABLE = _cfast is not None


def rrl_spec(rrl: RrlConfig) -> tuple[Any, ...]:
    """The RRL settings as `_cfast.Guard` reads them: rates, window, slip, prefix lengths and the exempt
    networks as (v6, network, netmask) integers."""
    nets = [ipaddress.ip_network(cidr, strict=False) for cidr in rrl.exempt]
    return (
        float(rrl.responses_per_second),
        float(rrl.nxdomains_per_second),
        float(rrl.errors_per_second),
        float(rrl.window),
        rrl.slip,
        rrl.ipv4_prefix_length,
        rrl.ipv6_prefix_length,
        tuple((n.version == 6, int(n.network_address), int(n.netmask)) for n in nets),
    )


class NativeGuard:
    """Cookies and RRL for one responder, in C. Either part may be off (None)."""

    __slots__ = ("max_udp_payload", "native", "settings")

    def __init__(
        self,
        rrl: RrlConfig | None,
        cookies: CookieConfig | None,
        secret: bytes,
        *,
        max_udp_payload: int = 1232,
    ) -> None:
        assert _cfast is not None, "gslbd.wire._cfast is not compiled here"
        self.settings = (rrl, cookies, max_udp_payload)
        self.max_udp_payload = max_udp_payload
        jar_secret = None
        if cookies is not None:
            jar_secret = cookies.secret if cookies.secret is not None else secret
        self.native = _cfast.Guard(rrl_spec(rrl) if rrl is not None else None, jar_secret, max_udp_payload)

    @property
    def rrl(self) -> bool:
        return self.settings[0] is not None

    @property
    def cookies(self) -> bool:
        return self.settings[1] is not None

    def apply(self, query: bytes, reply: bytes | None, ip: int, v6: bool, tcp: bool) -> bytes | None:
        """The response to send (possibly changed), or None to send nothing (wire/guard.py Guard.apply)."""
        return self.native.apply(query, reply, ip, v6, tcp)

    def counts(self) -> dict[str, int]:
        """Counters by event name (server events in /metrics), as Guard.counts."""
        limited, dropped, slipped, passed, new, valid, invalid = self.native.counts()
        out: dict[str, int] = {}
        if self.rrl:
            out["rrl_limited"] = limited
            out["rrl_dropped"] = dropped
            out["rrl_slipped"] = slipped
            out["rrl_cookie_passed"] = passed
        if self.cookies:
            out["cookies_new"] = new
            out["cookies_valid"] = valid
            out["cookies_invalid"] = invalid
        return out

    def pin(self, monotonic: float | None, wall: float | None) -> None:
        """Pin the clocks the guard reads (tests; None: the system's clocks)."""
        self.native.pin(monotonic, wall)
