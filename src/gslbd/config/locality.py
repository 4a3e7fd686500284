"""Locality names (Kubernetes Federation style): their owner names, the localities that declare them,
and the config check that they collide with nothing else a zone serves.

For a service `<label>.<origin>` with `locality_names: true` every declared region gets
`<label>.<region>.<origin>` and every declared zone of a region gets `<label>.<zone>.<region>.<origin>`.
A locality is declared by an endpoint of the service (its own `locality`, which defaults to its site's)
and by every known site (`site.locality`, `sites.<name>.locality`), so that the names of a site stay
while it has nothing healthy to publish. The answers are decided in `gslbd.answer.locality`; the
naming lives here, below both the validation and the answers, so that both use one definition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gslbd.config.fields import MapReader
from gslbd.config.names import in_zone
from gslbd.config.zones import ZoneInfo
from gslbd.model.config import Config
from gslbd.model.service import Service
from gslbd.model.topology import Locality

MAX_NAME_TEXT = 254  # an absolute name's text without the root's length byte: 255 bytes on the wire


def locality_name(service: Service, region: str, zone: str | None = None) -> str:
    """`<label>.<zone>.<region>.<origin>`, or `<label>.<region>.<origin>` without a zone."""
    middle = f"{zone}.{region}" if zone else region
    return f"{service.label}.{middle}.{service.zone}"


@dataclass(frozen=True, slots=True)
class Level:
    """One locality name of a service: a region (`zone` None) or a zone inside a region."""

    name: str
    region: str
    zone: str | None

    def holds(self, locality: Locality) -> bool:
        """Is an endpoint with this locality inside this level?"""
        if locality.region != self.region:
            return False
        return self.zone is None or locality.zone == self.zone

    def where(self) -> str:
        """The level in words, for explanations and error messages."""
        if self.zone is None:
            return f"region {self.region}"
        return f"zone {self.zone} of region {self.region}"


def levels(service: Service, localities: Iterable[Locality]) -> tuple[Level, ...]:
    """The locality names `localities` declare for `service`: every region first, then every zone,
    each in the order first declared (a region before the zones inside it). A zone without a region
    declares nothing."""
    regions: dict[str, None] = {}
    zones: dict[tuple[str, str], None] = {}
    for loc in localities:
        if not loc.region:
            continue
        regions.setdefault(loc.region)
        if loc.zone:
            zones.setdefault((loc.region, loc.zone))
    out = [Level(locality_name(service, region), region, None) for region in regions]
    out += [Level(locality_name(service, region, zone), region, zone) for region, zone in zones]
    return tuple(out)


def site_localities(config: Config) -> tuple[Locality, ...]:
    """The localities every known site declares (this site's included), in config order."""
    own = (config.site.locality,)
    return own + tuple(s.locality for s in config.sites if s.name != config.site.name)


def check_locality_names(
    named: Sequence[tuple[Service, MapReader | None]],
    services: Sequence[Service],
    zones: list[ZoneInfo],
    sites: Mapping[str, Locality],
) -> None:
    """Report every locality name that is also another name of its zone (a service, a static record,
    a nameserver, another service's locality name) or that falls inside a more specific served zone.

    `named`: the services with locality names, each with the reader to report a clash on (in config
    order); `services`: every service. Run only on a config without errors so far. Localities that only
    peers publish at run time are not known here; `gslbd.answer.locality` gives the names defined here
    precedence over them."""
    taken: dict[str, str] = {}
    for info in zones:
        origin = info.zone.origin
        taken.setdefault(origin, f"also the apex of zone {origin!r}")
        for ns in info.zone.nameservers:
            taken.setdefault(ns.name, f"also a nameserver of zone {origin!r}")
        for owner, places in info.owners.items():
            taken.setdefault(owner, f"also a static record ({places[0].record})")
    if not named:
        return
    names = {service.name for service in services}
    origins = [info.zone.origin for info in zones]
    declared = tuple(sites.values())
    for service, r in named:
        if r is None:
            continue
        for level in levels(service, [e.locality for e in service.endpoints] + list(declared)):
            why = taken.get(level.name)
            if why is None and level.name in names:
                why = f"also the service {level.name!r}"
            inner = _most_specific(level.name, origins)
            if why is None and inner != service.zone:
                why = f"inside the more specific zone {inner!r}"
            if why is None and len(level.name) > MAX_NAME_TEXT:
                why = "longer than a DNS name can be (255 bytes)"
            if why is not None:
                part = "region" if level.zone is None else "zone"
                r.error(
                    "locality_names",
                    f"locality name {level.name!r} ({level.where()}) is {why}; "
                    f"rename one of them or the {part}",
                )
                continue
            taken[level.name] = f"also a locality name of service {service.name!r}"


def _most_specific(name: str, origins: list[str]) -> str | None:
    found = [o for o in origins if in_zone(name, o)]
    return max(found, key=len) if found else None
