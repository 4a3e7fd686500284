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
from gslbd.model.topology import IPNetwork, Locality, NetworkEntry, SiteInfo, Topology
from gslbd.policy.base import Location, PolicyEnv

log = logging.getLogger(__name__)

CACHE_LIMIT = 10_000
UNKNOWN = Location()
# A network whose nested networks (or, outside every network, the outermost ones) number more than this
# gets the ECS scope of a whole address (capped at the source prefix): a bound on the per-query work.
NESTED_LIMIT = 32

Table = list[tuple[int, dict[int, NetworkEntry]]]
# Networks as (network address as an int, prefix length); None: more than NESTED_LIMIT of them.
Nets = tuple[tuple[int, int], ...] | None


def family_bits(v6: bool) -> int:
    return 128 if v6 else 32


def covering_bits(ip: int, bits: int, networks: tuple[tuple[int, int], ...]) -> int:
    """The shortest prefix of `ip` inside which every address is in or out of each of `networks` alike
    (RFC 7871 7.2.1's scope of an answer that depends on them): a network holding `ip` needs its own
    length, one that does not needs one bit past their common prefix."""
    best = 0
    for network, length in networks:
        diff = (ip ^ network) >> (bits - length)
        need = length if diff == 0 else length - diff.bit_length() + 1
        best = max(best, need)
    return best


def scope_lists(entries: list[NetworkEntry]) -> tuple[dict[IPNetwork, Nets], Nets]:
    """Per network of one family, itself and the networks nested in it (what decides the longest
    prefix match of an address inside it), and the outermost networks (what decides it outside all)."""
    nets = sorted({e.cidr for e in entries}, key=lambda n: (int(n.network_address), n.prefixlen))
    inside: dict[IPNetwork, Nets] = {}
    for i, net in enumerate(nets):
        top = int(net.broadcast_address)
        found = [(int(net.network_address), net.prefixlen)]
        for other in nets[i + 1 :]:
            if int(other.network_address) > top:
                break
            if len(found) >= NESTED_LIMIT:
                found = []
                break
            found.append((int(other.network_address), other.prefixlen))
        inside[net] = tuple(found) if found else None
    outer: list[tuple[int, int]] = []
    top = -1
    for net in nets:
        if int(net.network_address) > top:
            outer.append((int(net.network_address), net.prefixlen))
            top = int(net.broadcast_address)
    return inside, (tuple(outer) if len(outer) <= NESTED_LIMIT else None)


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
        v4 = [e for e in topology.networks if e.cidr.version == 4]
        v6 = [e for e in topology.networks if e.cidr.version == 6]
        (in4, out4), (in6, out6) = scope_lists(v4), scope_lists(v6)
        self.inside: dict[IPNetwork, Nets] = {**in4, **in6}  # per network: see scope_lists
        self.outside: tuple[Nets, Nets] = (out4, out6)
        self.scopes: dict[tuple[int, bool, bool], int] = {}

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
        entry = self.topology_entry(ip, v6)
        return self.entry_location(entry) if entry is not None else None

    def topology_entry(self, ip: int, v6: bool) -> NetworkEntry | None:
        """The topology network that places the client (the longest prefix holding it), or None."""
        for shift, table in self.v6 if v6 else self.v4:
            entry = table.get(ip >> shift)
            if entry is not None:
                return entry
        return None

    def scope_networks(self, entry: NetworkEntry | None, v6: bool) -> Nets:
        """The networks whose membership decides where the clients placed by `entry` (None: outside
        every network) are: the C table holds the same per location id."""
        return self.inside[entry.cidr] if entry is not None else self.outside[v6]

    def scope(self, ip: int, v6: bool, asn: bool = False) -> int:
        """The prefix length of `ip` inside which every client is located alike (the ECS scope of an
        answer that depends on the location): the topology networks that decide it, and for a client
        outside them the GeoIP record's network (and with `asn` the ASN record's, which the location
        carries for every client)."""
        key = (ip, v6, asn)
        found = self.scopes.get(key)
        if found is None:
            bits = family_bits(v6)
            entry = self.topology_entry(ip, v6)
            nets = self.scope_networks(entry, v6)
            found = bits if nets is None else covering_bits(ip, bits, nets)
            if entry is None:
                found = max(found, _prefix(self.reader, ip, v6))
            if asn:
                found = max(found, _prefix(self.asn_reader, ip, v6))
            if len(self.scopes) >= CACHE_LIMIT:
                self.scopes.clear()
            self.scopes[key] = found
        return found

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


def _prefix(reader: maxminddb.Reader | None, ip: int, v6: bool) -> int:
    """The prefix length of the database's network that holds `ip` (its record, or its gap): every
    address inside it has the same record. 0 without a database, or for IPv6 on an IPv4 database."""
    if reader is None:
        return 0
    address = ipaddress.IPv6Address(ip) if v6 else ipaddress.IPv4Address(ip)
    try:
        _, length = reader.get_with_prefix_len(address)
    except ValueError:  # an IPv6 address asked of an IPv4-only database: unknown, whatever the address
        return 0
    except maxminddb.InvalidDatabaseError:  # a damaged record: the whole address decides
        return family_bits(v6)
    return int(length)


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
