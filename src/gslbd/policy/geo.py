"""geo: answer with the candidates closest to the client.

The client's location (topology networks first, then the GeoIP database; see locate.py) picks the
candidates in the same zone, else in the same region, else at the same site, else at the nearest site
by great-circle distance (from the client's coordinates, or its site's), else all candidates. Inside
the chosen set the answer rotates per query like round_robin.

`services[].bias` moves the borders between sites in that distance-based choice as Route 53's
geoproximity does: a site's distance counts as distance * (1 - bias / 100), so a positive bias
(up to 99) grows the area a site wins and a negative one (down to -99) shrinks it.

With `select: first_n` each chosen set (still rotated per query) is followed by the other candidates,
nearest (biased distance) to the set's first site first, those of sites without coordinates last, cut
to max_answers: the next-nearest site's addresses ride along as backups.

Every distinct set is built at plan time; a query only looks its client up in a bounded per-plan
cache (address -> set), locating the client on a miss.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality, SiteInfo
from gslbd.policy.base import FixedPlan, Location, Locator, Plan, PolicyEnv
from gslbd.policy.round_robin import RotationPlan, rotations
from gslbd.policy.select import followed_by
from gslbd.types import Select

# A plan forgets the clients it has located once it has seen this many (per address family).
CACHE_LIMIT = 100_000
EARTH_RADIUS_KM = 6371.0


def great_circle_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Haversine distance in kilometres between two (latitude, longitude) points in degrees."""
    lat1, lon1 = math.radians(a[0]), math.radians(a[1])
    lat2, lon2 = math.radians(b[0]), math.radians(b[1])
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(h)))


def endpoint_locality(endpoint: Endpoint, sites: Mapping[str, SiteInfo]) -> Locality:
    """An endpoint's locality, or its site's when it declares none."""
    if endpoint.locality.region is not None:
        return endpoint.locality
    info = sites.get(endpoint.site)
    return info.locality if info is not None else endpoint.locality


def biased_km(km: float, bias: int) -> float:
    """A site's distance as the distance-based choice compares it (Route 53 geoproximity's formula)."""
    return km * (1 - bias / 100)


@dataclass(frozen=True, slots=True)
class GeoTables:
    """Which candidate set (class) answers each kind of location."""

    by_zone: Mapping[tuple[str | None, str], int]
    by_region: Mapping[str, int]
    by_site: Mapping[str, int]
    # Sites with candidates and coordinates: (site, point, candidate set, bias).
    site_points: tuple[tuple[str, tuple[float, float], int, int], ...]
    everyone: int


@dataclass(frozen=True, slots=True)
class GeoPlan:
    """Rotations of each candidate set laid end to end: set c owns variants starts[c] .. +counts[c]."""

    variants: tuple[tuple[Endpoint, ...], ...]
    starts: tuple[int, ...]
    counts: tuple[int, ...]
    tables: GeoTables
    locator: Locator = field(compare=False)
    sites: Mapping[str, SiteInfo] = field(compare=False)
    cache4: dict[int, int] = field(default_factory=dict, compare=False)
    cache6: dict[int, int] = field(default_factory=dict, compare=False)

    @property
    def location_dependent(self) -> bool:
        return True

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        cache = self.cache6 if v6 else self.cache4
        chosen = cache.get(ip)
        if chosen is None:
            chosen = self.classify(ip, v6)[0]
            if len(cache) >= CACHE_LIMIT:
                cache.clear()
            cache[ip] = chosen
        return self.starts[chosen] + seq % self.counts[chosen]

    def classify(self, ip: int, v6: bool) -> tuple[int, str]:
        """The candidate set for a client, and why."""
        return self.classify_location(self.locator.locate(ip, v6))

    def classify_location(self, loc: Location) -> tuple[int, str]:
        """The candidate set for a client at `loc`, and why (the C table precomputes it per location)."""
        t = self.tables
        region, zone = loc.locality.region, loc.locality.zone
        if zone is not None:
            found = t.by_zone.get((region, zone))
            if found is not None:
                return found, f"same zone {zone} as the client"
        if region is not None:
            found = t.by_region.get(region)
            if found is not None:
                return found, f"same region {region} as the client"
        if loc.site is not None:
            found = t.by_site.get(loc.site)
            if found is not None:
                return found, f"same site {loc.site} as the client"
        origin = loc.coordinates
        source = "the client's coordinates"
        info = self.sites.get(loc.site) if loc.site is not None else None
        if info is not None and info.coordinates is not None and origin in (None, info.coordinates):
            origin, source = info.coordinates, f"the client's site {info.name}"
        if origin is not None and t.site_points:
            best_site, best_class, best_score, best_km, best_bias = "", t.everyone, math.inf, 0.0, 0
            for site, point, chosen, bias in t.site_points:
                km = great_circle_km(origin, point)
                score = biased_km(km, bias)
                if score < best_score:
                    best_site, best_class, best_score, best_km, best_bias = site, chosen, score, km, bias
            if not any(bias for *_, bias in t.site_points):
                return best_class, f"nearest site {best_site} ({best_km:.0f} km from {source})"
            distances = ", ".join(
                f"{site} {biased_km(great_circle_km(origin, point), bias):.0f}"
                for site, point, _, bias in t.site_points
            )
            return best_class, (
                f"nearest site {best_site} with bias ({best_km:.0f} km from {source}, bias {best_bias:+d};"
                f" biased km: {distances})"
            )
        if loc.how == "unknown":
            return t.everyone, "client location unknown: all candidates"
        return t.everyone, "no candidate shares the client's zone, region or site and none is placed: all"

    def explain(self, ip: int, v6: bool) -> list[str]:
        chosen, why = self.classify(ip, v6)
        count = self.counts[chosen]
        members = self.variants[self.starts[chosen]]
        names = ", ".join(e.address for e in members)
        return [f"geo: {why} -> {names}", f"geo: rotates among {count} answer(s) per query"]


class _Builder:
    """Collects distinct candidate sets and their rotations."""

    def __init__(
        self, max_answers: int, after: Callable[[tuple[Endpoint, ...]], list[Endpoint]] | None = None
    ) -> None:
        self.max_answers = max_answers
        self.after = after  # select first_n: the candidates that follow a set, in order
        self.ids: dict[tuple[Endpoint, ...], int] = {}
        self.variants: list[tuple[Endpoint, ...]] = []
        self.starts: list[int] = []
        self.counts: list[int] = []

    def add(self, members: tuple[Endpoint, ...]) -> int:
        found = self.ids.get(members)
        if found is not None:
            return found
        new = self.ids[members] = len(self.starts)
        self.starts.append(len(self.variants))
        self.counts.append(len(members))
        if self.after is None:
            self.variants.extend(rotations(members, self.max_answers))
        else:
            rest = self.after(members)
            full = rotations(members, len(members))
            self.variants.extend(followed_by(r, rest, self.max_answers) for r in full)
        return new


def _nearest_after(
    candidates: tuple[Endpoint, ...], service: Service, sites: Mapping[str, SiteInfo]
) -> Callable[[tuple[Endpoint, ...]], list[Endpoint]]:
    """select first_n: the candidates by biased distance from a set's first site (unplaced ones last)."""
    bias = dict(service.bias)

    def after(members: tuple[Endpoint, ...]) -> list[Endpoint]:
        here = sites.get(members[0].site)
        if here is None or here.coordinates is None:
            return list(candidates)
        origin = here.coordinates

        def distance(e: Endpoint) -> float:
            info = sites.get(e.site)
            if info is None or info.coordinates is None:
                return math.inf
            return biased_km(great_circle_km(origin, info.coordinates), bias.get(e.site, 0))

        return sorted(candidates, key=distance)

    return after


class Geo:
    name = "geo"

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        if len(candidates) == 1:
            return FixedPlan(candidates, "geo: one candidate")
        zones: dict[tuple[str | None, str], list[Endpoint]] = {}
        regions: dict[str, list[Endpoint]] = {}
        sites: dict[str, list[Endpoint]] = {}
        for e in candidates:
            loc = endpoint_locality(e, env.sites)
            if loc.zone is not None:
                zones.setdefault((loc.region, loc.zone), []).append(e)
            if loc.region is not None:
                regions.setdefault(loc.region, []).append(e)
            sites.setdefault(e.site, []).append(e)
        first_n = service.select is Select.FIRST_N
        builder = _Builder(
            service.max_answers, _nearest_after(candidates, service, env.sites) if first_n else None
        )
        everyone = builder.add(candidates)
        by_zone = {k: builder.add(tuple(v)) for k, v in zones.items()}
        by_region = {k: builder.add(tuple(v)) for k, v in regions.items()}
        by_site = {k: builder.add(tuple(v)) for k, v in sites.items()}
        if len(builder.starts) == 1:
            reason = "geo: every candidate is in the same place, so all answer"
            turn = f"geo: {len(builder.variants)} rotations, one per query in turn"
            return RotationPlan(tuple(builder.variants), (reason, turn))
        points = []
        bias = dict(service.bias)
        for site, chosen in by_site.items():
            info = env.sites.get(site)
            if info is not None and info.coordinates is not None:
                points.append((site, info.coordinates, chosen, bias.get(site, 0)))
        tables = GeoTables(by_zone, by_region, by_site, tuple(points), everyone)
        return GeoPlan(
            tuple(builder.variants),
            tuple(builder.starts),
            tuple(builder.counts),
            tables,
            env.locator,
            env.sites,
        )
