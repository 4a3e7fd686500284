"""What services are validated against (`ServiceContext`), and the lookups both validators of a service
use: the zone holding a name and why a name cannot be a service (config/services.py is the located
validator, config/fast.py the fast path for the common shape)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gslbd.config.checks import CheckRef
from gslbd.config.fields import Report
from gslbd.config.names import relative_to
from gslbd.config.zones import ZoneInfo, reserved_message
from gslbd.model.topology import Locality

if TYPE_CHECKING:
    from gslbd.config.fast import FastIndex

MAX_EXCHANGE_LABEL = 63 - len("localtargets-")


@dataclass(slots=True)
class ServiceContext:
    """What services are checked against: the zones, the check profiles, and the known sites."""

    rep: Report
    zones: list[ZoneInfo]
    checks: CheckRef
    this_site: str
    site_locality: Callable[[str], Locality]
    peer_sites: set[str]
    can_locate: bool  # topology networks or a GeoIP database exist
    has_asn: bool = False  # topology.geoip.asn_database is set (pools' asn conditions)
    sites_used: dict[str, None] = field(default_factory=dict)  # every site named, in first-seen order
    served: dict[str, ZoneInfo] | None = None  # origin -> zone (the first of a duplicate), made on first use
    fast_index: FastIndex | None = None  # what the fast path looks up, made on first use


def served_zones(ctx: ServiceContext) -> dict[str, ZoneInfo]:
    """The zones by origin (made once per context: `zones` does not change while services are read)."""
    if ctx.served is None:
        ctx.served = {}
        for info in ctx.zones:
            ctx.served.setdefault(info.zone.origin, info)
    return ctx.served


def zone_of(served: dict[str, ZoneInfo], name: str) -> ZoneInfo | None:
    """The most specific served zone holding the absolute `name` (a lookup per label, not per zone)."""
    info = served.get(name)
    at = 0 if info is None else -1
    while info is None and at >= 0:
        at = name.find(".", at)
        if at < 0 or at + 1 >= len(name):
            break
        at += 1
        info = served.get(name[at:])
    return info if info is not None else served.get(".")


def name_problem(info: ZoneInfo, name: str) -> str | None:
    """Why `name` (inside `info`'s zone) cannot be a service, or None."""
    origin = info.zone.origin
    why = reserved_message(name, origin)
    if name == origin:
        why = f"a service cannot be the zone apex {origin!r} (it holds SOA and NS)"
    elif len(relative_to(name, origin).split(".", 1)[0]) > MAX_EXCHANGE_LABEL:
        limit = MAX_EXCHANGE_LABEL
        why = f"the first label of {name!r} is longer than {limit} (localtargets-<label> must fit)"
    if why is not None:
        return why
    owners = info.owners.get(name)
    if owners:
        return f"{name!r} is also a static record ({owners[0].record})"
    return None
