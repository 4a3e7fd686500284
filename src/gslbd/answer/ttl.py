"""The health-driven TTL (`services[].ttl: {max: 300, min: 5}`, gdnsd's "least time until the answer
could change"): computed when a service's answers are built, from the statuses and holds of that
moment, so it sits in the compiled table like a fixed TTL and every path (C, Python, slow) answers it.

For each endpoint of the service that is probed here and follows its checks (admin `obey`):

    k        the results that could change its verdict: 1 before its first result (which decides at
             once), else fall - (the failures its window holds now) when up, rise - (its consecutive
             successes) when down; at least 1
    elapsed  whole seconds since its last result (rounded down; 0 when none is known)
    t        k x interval - elapsed, at least 0
             + failover_delay when that change would leave its site without candidates, or
             + failback_delay when it would give a site without candidates one while another site
               has some (the change then moves the answer only once the delay has passed);
               no delay is added for a site a delay already holds

and for each hold (answer/delays.py) the time until it ends. The TTL is the least of these, rounded
down to whole seconds, at most `max` and at least `min`; `max` when nothing can change the answer
(no probed endpoint, every endpoint forced by an admin). The checks' ±10 % jitter and the probe's own
time are not counted: a change can come up to a tenth of `k x interval` sooner. Endpoints learned from
peer sites are not counted either (their site decides when they change).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from gslbd.answer.delays import site_up
from gslbd.model.service import Endpoint, EndpointKey, Service
from gslbd.state.hold import Hold
from gslbd.state.snapshot import Snapshot, effective_up
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState


def results_to_change(status: EndpointStatus | None, rise: int, fall: int, window: int) -> int:
    """How many more results could change an endpoint's verdict (at least 1)."""
    if status is None or status.healthy is None or status.provisional:
        return 1
    if status.healthy:
        fall = max(1, fall)
        size = max(fall, window or fall)
        failed = max(min(status.failures, size), status.history.bit_count())
        return max(1, fall - failed)
    return max(1, rise - status.successes)


def change_bound(
    service: Service,
    endpoints: tuple[Endpoint, ...],
    snapshot: Snapshot,
    statuses: Mapping[EndpointKey, EndpointStatus],
    holds: Iterable[Hold],
    now: float,
) -> float | None:
    """Seconds until the answers of `service` could change at the earliest (None: never by
    themselves). `endpoints`: the service's, configured and learned (for the sites' candidates)."""
    holds = tuple(holds)
    bound: float | None = None
    for hold in holds:
        bound = _least(bound, max(0.0, hold.until - now))
    held = {hold.site for hold in holds}
    up = {e.key: effective_up(e, snapshot) for e in endpoints}
    sites = site_up(service, endpoints, lambda e: up[e.key])
    for endpoint in service.endpoints:
        check = endpoint.check
        if check is None or endpoint.key not in up or snapshot.admin_state(endpoint) is not AdminState.OBEY:
            continue  # unprobed, of a peer site (learned instead), or forced by an admin
        status = statuses.get(endpoint.key)
        k = results_to_change(status, check.rise, check.fall, check.window)
        elapsed = 0.0
        if status is not None and status.last_check is not None:
            elapsed = float(max(0, math.floor(now - status.last_check)))
        seconds = max(0.0, k * check.interval - elapsed)
        if endpoint.site not in held:
            seconds += _delay_after(service, endpoint, endpoints, up, sites)
        bound = _least(bound, seconds)
    return bound


def _delay_after(
    service: Service,
    endpoint: Endpoint,
    endpoints: tuple[Endpoint, ...],
    up: Mapping[EndpointKey, bool],
    sites: Mapping[str, bool],
) -> float:
    """The delay a change of `endpoint`'s verdict would wait before it moved the answer (0: none)."""
    if not service.failover_delay and not service.failback_delay:
        return 0.0
    flipped = {**up, endpoint.key: not up[endpoint.key]}
    after = site_up(service, endpoints, lambda e: flipped[e.key])
    site = endpoint.site
    if sites.get(site) and not after.get(site):
        return service.failover_delay
    if not sites.get(site) and after.get(site) and any(v for s, v in sites.items() if s != site):
        return service.failback_delay
    return 0.0


def _least(bound: float | None, seconds: float) -> float:
    return seconds if bound is None else min(bound, seconds)


def dynamic_ttl(service: Service, bound: float | None) -> int:
    """The TTL a service with `ttl_range` answers, given the change bound."""
    spec = service.ttl_range
    assert spec is not None
    if bound is None:
        return spec.max
    return max(spec.min, min(spec.max, math.floor(bound)))
