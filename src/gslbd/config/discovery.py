"""`peers.discover: ns`: the peer sites are read from the zones' own NS names (k8gb's naming).

k8gb names the nameserver of site `<site>` for zone `<zone>` delegated from `<parent>`

    gslb-ns-<site>-<zone relative to parent, dots as dashes>.<parent>
    e.g. gslb-ns-eu-cloud.example.com.  (site eu, zone cloud.example.com., parent example.com.)

The whole zone with dashes is accepted as well (gslb-ns-eu-cloud-example-com.example.com.). Every such
name of another site becomes a peer, polled at the name's addresses (its glue) on `peers.port`. Sites
listed under `peers.sites` with nameservers keep them; listed sites without nameservers get the
discovered ones. Discovery runs when the configuration is loaded, so a reload re-reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gslbd.model.config import ListenAddress, PeersConfig, PeerSite
from gslbd.model.zone import Zone
from gslbd.types import Discover

PREFIX = "gslb-ns-"


def ns_site(ns_name: str, origin: str) -> str | None:
    """The site named by a k8gb-style nameserver name of zone `origin`, or None when the name does not
    follow the pattern. Both names are absolute and lower case."""
    first, _, parent = ns_name.partition(".")
    if not first.startswith(PREFIX) or not parent:
        return None
    rest = first[len(PREFIX) :]
    zone = origin.rstrip(".")
    suffixes = [zone.replace(".", "-")]
    if origin.endswith("." + parent):
        suffixes.insert(0, origin[: -len(parent) - 1].replace(".", "-"))
    for suffix in suffixes:
        if rest.endswith("-" + suffix) and len(rest) > len(suffix) + 1:
            return rest[: -len(suffix) - 1]
    return None


def discovered_sites(zones: Sequence[Zone], this_site: str, port: int) -> dict[str, list[ListenAddress]]:
    """Peer site -> nameserver addresses, from every zone's k8gb-style NS names (this site left out).
    A site whose names have no address maps to an empty list."""
    found: dict[str, list[ListenAddress]] = {}
    for zone in zones:
        for ns in zone.nameservers:
            site = ns_site(ns.name, zone.origin)
            if site is None or site == this_site:
                continue
            addresses = found.setdefault(site, [])
            for address in ns.addresses:
                entry = ListenAddress(address, port)
                if entry not in addresses:
                    addresses.append(entry)
    return found


def with_discovered(
    peers: PeersConfig, zones: Sequence[Zone], this_site: str
) -> tuple[PeersConfig, list[str]]:
    """`peers` with the sites `discover: ns` finds added, and warnings about what cannot be polled.
    With `discover: static` it is returned unchanged."""
    if peers.discover is not Discover.NS:
        return peers, []
    found = discovered_sites(zones, this_site, peers.port)
    warnings: list[str] = []
    sites: list[PeerSite] = []
    listed = {p.name for p in peers.sites}
    for site in peers.sites:
        servers = site.nameservers or tuple(found.get(site.name, []))
        if not servers:
            warnings.append(f"peer site '{site.name}' has no nameservers and none was discovered")
        sites.append(PeerSite(site.name, servers))
    for name, addresses in found.items():
        if name in listed:
            continue
        if not addresses:
            warnings.append(f"discovered peer site '{name}' has no nameserver address (glue): not polled")
            continue
        sites.append(PeerSite(name, tuple(addresses)))
    if not sites and any(ns.name.startswith(PREFIX) for zone in zones for ns in zone.nameservers):
        warnings.append(
            f"discover: ns found no other site in the nameservers (names {PREFIX}<site>-<zone>.<parent>)"
        )
    return replace(peers, sites=tuple(sites)), warnings
