"""Where things are: localities, sites, and client networks."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Locality:
    """A region and (optionally) a zone inside it, as cloud providers name them."""

    region: str | None = None
    zone: str | None = None


@dataclass(frozen=True, slots=True)
class SiteInfo:
    """A known site: its locality and its coordinates (latitude, longitude) for geo ordering."""

    name: str
    locality: Locality = Locality()
    coordinates: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class NetworkEntry:
    """A client network and where its clients are. The most specific prefix wins."""

    cidr: IPNetwork
    site: str | None = None
    locality: Locality = Locality()


@dataclass(frozen=True, slots=True)
class Topology:
    """How clients are located: topology networks first, then an optional GeoIP database."""

    networks: tuple[NetworkEntry, ...] = ()
    geoip_database: str | None = None
    use_client_subnet: bool = True
    # The config line of `topology.geoip.database`, for errors found when the database is opened (not
    # part of what the topology is: moving the line changes nothing).
    geoip_line: int | None = field(default=None, compare=False)
    asn_database: str | None = (
        None  # `topology.geoip.asn_database`: a MaxMind ASN database (pools' asn rules)
    )
