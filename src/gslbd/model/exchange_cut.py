"""The exchange zone as a child of each signed public zone, delegated insecurely (docs/multisite.md).

A site that serves its exchange zones (`serves_exchange_zone`) answers `_gslbd-exchange-<site>.<origin>`
and every name below it from the exchange hook (exchange/xfrserve.py): unsigned, authoritative. In a
signed zone that is only consistent when the parent says the name is a zone cut without a DS, so
`with_exchange_cuts` gives every signed zone with nameservers a static NS set at its own exchange apex
(the zone's nameservers). The ordinary delegation code then answers the one question that stays the
parent's, DS at the cut (a signed NODATA whose NSEC lists NS RRSIG NSEC), and the NSEC chain links the
cut with its NS bit; the responder asks the hook about every other question at or below it.
"""

from __future__ import annotations

from dataclasses import replace

from gslbd.model.config import Config
from gslbd.model.zone import StaticRecord, Zone

EXCHANGE_PREFIX = "_gslbd-exchange-"


def exchange_apex(site: str, origin: str) -> str:
    """`_gslbd-exchange-<site>.<origin>`: the exchange zone of `site` for the served zone `origin`."""
    return f"{EXCHANGE_PREFIX}{site}.{origin}"


def serves_exchange_zone(config: Config) -> bool:
    """Whether this site serves its exchange zone: peers with `transfer` on, and one DNS process (the
    workers of `dns.workers > 1` have no journal; peers then poll this site name by name)."""
    peers = config.peers
    return peers is not None and peers.transfer and config.dns.workers <= 1


def exchange_cut(zone: Zone, site: str) -> tuple[StaticRecord, ...]:
    """The NS records of the cut at this site's exchange apex in `zone` (none when the zone is not
    signed or lists no nameservers)."""
    if zone.dnssec is None or not zone.nameservers:
        return ()
    apex = exchange_apex(site, zone.origin)
    names = dict.fromkeys(ns.name for ns in zone.nameservers)
    return tuple(StaticRecord(apex, "NS", name, zone.ttl) for name in names)


def with_exchange_cuts(config: Config) -> Config:
    """`config` with the exchange cut in each signed zone, when this site serves its exchange zones."""
    if not serves_exchange_zone(config):
        return config
    site = config.site.name
    zones = tuple(
        replace(zone, records=zone.records + cut) if (cut := exchange_cut(zone, site)) else zone
        for zone in config.zones
    )
    return config if zones == config.zones else replace(config, zones=zones)
