"""`services[].failover_delay` and `failback_delay` (Akamai GTM's failover and failback delays): pure,
with the time given, so "fails back 60 s after eu recovered" is an exact test.

Each site of a service with a delay is tracked (`SiteTrack`): whether it has candidates now (`up`: an
endpoint up by health and admin, at least `min_healthy` of them when that is set; every address family
together), whether the answers treat it as up (`shown`), and since when `up` has been what it is. `shown`
follows `up` once `up` has stayed the same for the delay of that direction:

- a shown site that lost every candidate at `since` is still answered (its endpoints that an admin did
  not force down) until `since + failover_delay`: a `Hold` of kind "failover";
- a site that had none and has candidates again since `since` is left out of the answers until
  `since + failback_delay` (a `Hold` of kind "failback"), unless no other site has candidates: a
  delay never turns an answer into all_down.

A site whose `up` flips back before its delay has passed never moved, so a backend that flaps faster
than the delay never moves the answer: over any stretch of time a site is moved back at most once per
`failback_delay` and away at most once per `failover_delay` (tests/unit/health/test_delays_property.py).
The first time a site is seen, `shown` is `up` (a start or a reload holds nothing).

The control plane (app/delays.py) keeps the tracks, puts the holds in every snapshot and schedules a
rebuild for the moment the earliest one expires (`next_expiry`); the query path never reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass

from gslbd.model.service import Endpoint, Service
from gslbd.state.hold import Hold


@dataclass(frozen=True, slots=True)
class SiteTrack:
    """One site of one service: `up` (has candidates now), `shown` (the answers treat it as up), and
    `since` (wall seconds: when `up` last changed, or when the site was first seen)."""

    up: bool
    shown: bool
    since: float


def has_delays(service: Service) -> bool:
    return service.failover_delay > 0 or service.failback_delay > 0


def advance(before: SiteTrack | None, up: bool, now: float, failover: float, failback: float) -> SiteTrack:
    """The track of a site that has candidates (`up`) at `now`, after `before` (None: first seen)."""
    if before is None:
        return SiteTrack(up, up, now)
    since = before.since if before.up == up else now
    shown = before.shown
    if shown != up and now - since >= (failback if up else failover):
        shown = up
    return SiteTrack(up, shown, since)


def hold_of(site: str, track: SiteTrack, failover: float, failback: float) -> Hold | None:
    """The hold a track means now (None when the answers follow `up`)."""
    if track.shown == track.up:
        return None
    if track.up:
        return Hold(site, "failback", track.since, track.since + failback, failback)
    return Hold(site, "failover", track.since, track.since + failover, failover)


def site_up(
    service: Service, endpoints: Iterable[Endpoint], is_up: Callable[[Endpoint], bool]
) -> dict[str, bool]:
    """Per site of `endpoints` (the service's, configured and learned): does it have candidates (at
    least `min_healthy` of its endpoints up, when set)?"""
    total: dict[str, int] = {}
    up: dict[str, int] = {}
    for endpoint in endpoints:
        total[endpoint.site] = total.get(endpoint.site, 0) + 1
        up[endpoint.site] = up.get(endpoint.site, 0) + (1 if is_up(endpoint) else 0)
    threshold = service.min_healthy
    return {
        site: up[site] >= (threshold.needed(count) if threshold is not None else 1)
        for site, count in total.items()
    }


def track_service(
    service: Service,
    ups: Mapping[str, bool],
    before: Mapping[str, SiteTrack],
    now: float,
    present: Container[str] | None = None,
) -> tuple[dict[str, SiteTrack], tuple[Hold, ...]]:
    """Every site's track after `before`, given which sites have candidates now, and the holds.
    `present`: the sites that have endpoints to answer at all (None: every site); a site without any
    (a peer site that publishes none) cannot be held on failover, so it counts as gone at once and
    its return is held by failback_delay."""
    failover, failback = service.failover_delay, service.failback_delay
    tracks: dict[str, SiteTrack] = {}
    for site, up in ups.items():
        track = advance(before.get(site), up, now, failover, failback)
        if track.shown and not track.up and present is not None and site not in present:
            track = SiteTrack(False, False, track.since)
        tracks[site] = track
    holds = tuple(
        hold
        for site, track in tracks.items()
        if (hold := hold_of(site, track, failover, failback)) is not None
    )
    return tracks, holds


def next_expiry(holds: Iterable[Hold]) -> float | None:
    """When the earliest hold ends (None: none)."""
    return min((h.until for h in holds), default=None)


def apply_holds(
    healthy: tuple[Endpoint, ...],
    family: tuple[Endpoint, ...],
    holds: tuple[Hold, ...],
    held_in: Callable[[Endpoint], bool],
) -> tuple[tuple[Endpoint, ...], str]:
    """The candidates of one family under the holds, and what they did (for the Outcome's reason; ""
    when nothing). A failover hold adds the held site's endpoints of the family that `held_in` allows
    (those an admin did not force down); a failback hold takes the site's endpoints out, unless that
    would leave no candidate."""
    if not holds:
        return healthy, ""
    why: list[str] = []
    out = list(healthy)
    for hold in holds:
        if hold.kind == "failover":
            present = {e.address for e in out}
            added = [e for e in family if e.site == hold.site and e.address not in present and held_in(e)]
            if added:
                out.extend(added)
                why.append(hold.text())
    for hold in holds:
        if hold.kind == "failback":
            kept = [e for e in out if e.site != hold.site]
            if len(kept) == len(out):
                continue
            if kept:
                out = kept
                why.append(hold.text())
            else:
                why.append(hold.unheld_text())
    order = {e.address: i for i, e in enumerate(family)}
    out.sort(key=lambda e: order.get(e.address, len(order)))
    return tuple(out), "; ".join(why)
