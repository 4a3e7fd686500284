"""`services[].ttl` (a fixed TTL, or `{max: 300, min: 5}`: a health-driven one) and
`services[].failover_delay` / `failback_delay` (durations, default 0s): how fast an answer may move."""

from __future__ import annotations

from gslbd.config.fields import MapReader, duration, ttl
from gslbd.config.loader import Map
from gslbd.model.service import TtlRange

_TTL_KEYS = ("max", "min")


def read_ttl(r: MapReader, default: int) -> tuple[int, TtlRange | None]:
    """The service's fixed TTL and its health-driven range (None for a fixed TTL). With a range, the
    fixed TTL is its `max` (what an answer that cannot change gets)."""
    if not isinstance(r.node_of("ttl"), Map):
        return r.get("ttl", ttl, default), None
    sub = r.sub("ttl")
    if sub is None:
        return default, None
    sub.check_keys(_TTL_KEYS)
    high = sub.req("max", ttl)
    low = sub.get("min", ttl, 0)
    if high is None:
        return default, None
    if low > high:
        sub.error("min", f"min {low} is more than max {high}")
        return high, None
    return high, TtlRange(low, high)


def read_delays(r: MapReader) -> tuple[float, float]:
    """`failover_delay` and `failback_delay` in seconds (0 when absent or invalid, which is reported)."""
    return r.get("failover_delay", duration(positive=False), 0.0), r.get(
        "failback_delay", duration(positive=False), 0.0
    )
