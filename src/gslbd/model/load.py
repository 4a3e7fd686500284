"""Load feedback (`endpoints[].load`, `services[].load`, `weight_from: load`, `shed_load`): what is
configured. The figures themselves live in the health book (state/book.py) and are smoothed by the pure
core policy/load.py; docs/policies/load.md describes the whole."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class OnMissing(StrEnum):
    """`load.on_missing`: what a load figure becomes once the last good one is too old (STALE_INTERVALS)."""

    KEEP = "keep"  # the last good figure stays
    FULL = "full"  # the endpoint counts as fully loaded (load 1.0)
    IGNORE = "ignore"  # no figure: the endpoint is answered as if it reported no load at all


class WeightFrom(StrEnum):
    """`services[].weight_from` (policy weighted): where an endpoint's weight comes from."""

    CONFIG = "config"  # `endpoints[].weight` (the default)
    LOAD = "load"  # `weight` x the capacity left, 1 - load (PowerDNS pickselfweighted style)


@dataclass(frozen=True, slots=True)
class LoadSource:
    """Where one endpoint's load is read: `url` (`{address}` replaced by the endpoint's probed address,
    IPv6 in brackets) every `every` seconds, cut off at `timeout`; the body is a plain number, a JSON
    object `{"load": x}`, or with `metric` the value of that metric in a Prometheus text exposition.
    `half_life` is the EWMA's (seconds): a change of the reported load is half in the figure after it."""

    url: str
    every: float = 5.0
    timeout: float = 2.0
    metric: str | None = None
    half_life: float = 15.0
    on_missing: OnMissing = OnMissing.KEEP

    def url_for(self, address: str) -> str:
        host = f"[{address}]" if ":" in address else address
        return self.url.replace("{address}", host)


@dataclass(frozen=True, slots=True)
class ShedLoad:
    """`services[].shed_load: {low, high}`: watermarks of the load figure (0..1, 1 = full). Below `low`
    an endpoint keeps its share; between them its share falls linearly to 0; above `high` it leaves the
    answer unless every candidate is above it (then all stay)."""

    low: float
    high: float


@dataclass(frozen=True, slots=True)
class LoadState:
    """What is known about one endpoint's load. `smoothed` is the EWMA of the good figures, `used` what
    the answers use (None: no figure), `good_at` the time of the last good figure, `at` of the last
    update, `out` whether shedding took it out of the answer (above `high`), `raw` the last reported
    figure, `failures` the fetches failed in a row and `error` the last failure."""

    smoothed: float | None = None
    used: float | None = None
    good_at: float | None = None
    at: float | None = None
    out: bool = False
    raw: float | None = None
    failures: int = 0
    error: str = ""
