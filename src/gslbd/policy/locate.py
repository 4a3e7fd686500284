"""Where a client is: topology networks (longest prefix first), then a GeoIP database, else unknown.

`TopologyLocator` is the `Locator` that geo and explain use. Topology networks are kept per family as
a short list of (shift, {network >> shift: entry}) tables, longest prefix first, so a lookup costs one
dict probe per distinct prefix length. The GeoIP database (MaxMind format: GeoLite2/DB-IP City or
Country, or any database with compatible records) is read with maxminddb.

Policies cache clients per plan, so the locator is off the per-query path; it still keeps a small
bounded cache because every geo plan of every service locates the same resolvers.
"""

from __future__ import annotations

import ipaddress
import logging
import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import maxminddb

from gslbd.errors import ConfigError, Problem
from gslbd.model.config import Config
from gslbd.model.topology import Locality, NetworkEntry, SiteInfo, Topology
from gslbd.policy.base import Location, PolicyEnv

log = logging.getLogger(__name__)

CACHE_LIMIT = 10_000
UNKNOWN = Location()

Table = list[tuple[int, dict[int, NetworkEntry]]]


def build_tables(networks: tuple[NetworkEntry, ...]) -> tuple[Table, Table]:
    """Per family (v4, v6): (shift, {masked network >> shift: entry}) tables, longest prefix first.
    Of two entries with the same network the first one listed wins."""
    tables: tuple[dict[int, dict[int, NetworkEntry]], dict[int, dict[int, NetworkEntry]]] = ({}, {})
    for entry in networks:
        net = entry.cidr
        bits = net.max_prefixlen
        shift = bits - net.prefixlen
        by_len = tables[1 if net.version == 6 else 0].setdefault(shift, {})
        by_len.setdefault(int(net.network_address) >> shift, entry)
    v4, v6 = (sorted(t.items()) for t in tables)
    return list(v4), list(v6)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _coordinates(record: Mapping[str, Any]) -> tuple[float, float] | None:
    location = record.get("location")
    if not isinstance(location, Mapping):
        return None
    lat, lon = location.get("latitude"), location.get("longitude")
    if isinstance(lat, int | float) and isinstance(lon, int | float):
        return float(lat), float(lon)
    return None


def _code(record: Mapping[str, Any], key: str, field: str) -> str | None:
    value = record.get(key)
    return _text(value.get(field)) if isinstance(value, Mapping) else None


def location_from_record(record: Mapping[str, Any], sites: Mapping[str, SiteInfo]) -> Location:
    """A Location from a GeoIP record: coordinates from `location`, and the names of what matched.

    Besides the MaxMind fields, a record may carry a `gslbd` map with `site`, `region` and `zone`
    (for custom databases); a site named there brings its locality and coordinates when known.
    """
    coords = _coordinates(record)
    facts = []
    if coords is not None:
        facts.append(f"location {coords[0]:g},{coords[1]:g}")
    country = _code(record, "country", "iso_code") or _code(record, "registered_country", "iso_code")
    if country:
        facts.append(f"country {country}")
    subdivisions = record.get("subdivisions")
    if isinstance(subdivisions, list) and subdivisions and isinstance(subdivisions[0], Mapping):
        sub = _text(subdivisions[0].get("iso_code"))
        if sub:
            facts.append(f"subdivision {sub}")
    continent = _code(record, "continent", "code")
    if continent:
        facts.append(f"continent {continent}")
    site: str | None = None
    locality = Locality()
    extra = record.get("gslbd")
    if isinstance(extra, Mapping):
        site = _text(extra.get("site"))
        locality = Locality(_text(extra.get("region")), _text(extra.get("zone")))
        info = sites.get(site) if site else None
        if info is not None:
            if locality.region is None:
                locality = info.locality
            if coords is None:
                coords = info.coordinates
        facts.extend(f"gslbd.{k} {v}" for k, v in (("site", site), ("region", locality.region)) if v)
    if not facts:
        return UNKNOWN
    how = "geoip " + ", ".join(facts)
    return Location(site, locality, coords, how, country, continent)


class TopologyLocator:
    """Locates clients by the topology networks, then the GeoIP database (opened here when set)."""

    def __init__(self, topology: Topology, sites: Mapping[str, SiteInfo]) -> None:
        self.sites = sites
        self.v4, self.v6 = build_tables(topology.networks)
        self.cache4: dict[int, Location] = {}
        self.cache6: dict[int, Location] = {}
        self.reader = _open(topology.geoip_database, "topology.geoip.database", "GeoIP")
        self.asn_reader = _open(topology.asn_database, "topology.geoip.asn_database", "ASN")

    def locate(self, ip: int, v6: bool) -> Location:
        cache = self.cache6 if v6 else self.cache4
        found = cache.get(ip)
        if found is None:
            found = self.topology_location(ip, v6) or self.geoip_location(ip, v6) or UNKNOWN
            if self.asn_reader is not None:
                found = self.with_asn(found, ip, v6)
            if len(cache) >= CACHE_LIMIT:
                cache.clear()
            cache[ip] = found
        return found

    def topology_location(self, ip: int, v6: bool) -> Location | None:
        for shift, table in self.v6 if v6 else self.v4:
            entry = table.get(ip >> shift)
            if entry is not None:
                return self.entry_location(entry)
        return None

    def entry_location(self, entry: NetworkEntry) -> Location:
        """A topology entry's location; a site brings its locality (when the entry has none) and
        its coordinates."""
        info = self.sites.get(entry.site) if entry.site is not None else None
        locality = entry.locality
        if locality.region is None and locality.zone is None and info is not None:
            locality = info.locality
        coords = info.coordinates if info is not None else None
        return Location(entry.site, locality, coords, f"topology {entry.cidr}")

    def geoip_location(self, ip: int, v6: bool) -> Location | None:
        record = _record(self.reader, ip, v6)
        if record is None:
            return None
        found = location_from_record(record, self.sites)
        return None if found is UNKNOWN else found

    def with_asn(self, loc: Location, ip: int, v6: bool) -> Location:
        """`loc` with the client's autonomous system number from the ASN database, when it has one."""
        record = _record(self.asn_reader, ip, v6)
        number = record.get("autonomous_system_number") if record is not None else None
        if not isinstance(number, int) or isinstance(number, bool):
            return loc
        how = f"{loc.how}, asn {number}" if loc.how != "unknown" else f"asn {number}"
        return replace(loc, asn=number, how=how)

    def close(self) -> None:
        for reader in (self.reader, self.asn_reader):
            if reader is not None:
                reader.close()
        self.reader = self.asn_reader = None


def _open(path: str | None, field: str, what: str) -> maxminddb.Reader | None:
    if path is None:
        return None
    try:
        reader = maxminddb.open_database(path)
    except (OSError, ValueError, maxminddb.InvalidDatabaseError) as exc:
        problem = Problem(path, None, field, f"cannot open {what} database: {exc}")
        raise ConfigError([problem]) from exc
    meta = reader.metadata()
    log.info("%s database %s (%s, IPv%d)", what, path, meta.database_type, meta.ip_version)
    return reader


def _record(reader: maxminddb.Reader | None, ip: int, v6: bool) -> Mapping[str, Any] | None:
    if reader is None:
        return None
    address = ipaddress.IPv6Address(ip) if v6 else ipaddress.IPv4Address(ip)
    try:
        record = reader.get(address)
    except ValueError:  # an IPv6 address asked of an IPv4-only database
        return None
    except maxminddb.InvalidDatabaseError:  # a damaged record: the client stays unknown
        return None
    return record if isinstance(record, Mapping) else None


def known_sites(config: Config) -> dict[str, SiteInfo]:
    """Every known site by name; this site is implied when `sites` does not list it."""
    sites = {s.name: s for s in config.sites}
    if config.site.name not in sites:
        sites[config.site.name] = SiteInfo(config.site.name, config.site.locality)
    return sites


def build_env(config: Config, rng: random.Random) -> PolicyEnv:
    """The policy environment of a configuration: its locator, its sites and a plan-time rng."""
    sites = known_sites(config)
    return PolicyEnv(TopologyLocator(config.topology, sites), sites, rng)
