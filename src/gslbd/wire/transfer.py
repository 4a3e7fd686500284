"""The responder's hook for the multi-site exchange zone (exchange/xfrserve.py), and transfer streams.

`Responder.on_exchange(data, evaluated_at, src_ip, src_v6, tcp)` is asked (when set) about every query
that the fast path answers NXDOMAIN or REFUSED or without answer records (a denial; the referral at the
exchange cut of a signed zone, model/exchange_cut.py) and about every query that goes to the slow path
(NOTIFY, signed queries, unusual ones); it returns the response (bytes) for questions about this site's
exchange zone, or None to let the responder answer as ever. A zone transfer is several DNS messages: the hook
returns them as one `Framed` value, each message already with its two-byte TCP length prefix, which the
TCP listener writes as it is (it is never returned over UDP).
"""

from __future__ import annotations

from collections.abc import Callable

# (query packet, Unix seconds of the last health evaluation, source address, source is IPv6, over TCP)
ExchangeHook = Callable[[bytes, float, int, bool, bool], bytes | None]


class Framed(bytes):
    """DNS messages for TCP, each with its two-byte length prefix (a zone transfer)."""

    __slots__ = ()
