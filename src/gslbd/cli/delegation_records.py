"""The records a parent zone needs to delegate a gslbd zone, as zone-file text or an RFC 2136 update.

Pure: no sockets, no files. `gslbd delegation` (cli/delegation.py) does the I/O.

A zone `gslb.example.com.` served by gslbd is reachable only when its parent `example.com.` holds
- the NS set of the delegated name: every nameserver of the zone (one or more per site), and
- the addresses of those nameservers whose names lie inside the parent zone: glue proper for names
  below the delegated name (`ns1.gslb.example.com.`), ordinary address records for siblings such as
  k8gb's `gslb-ns-eu-gslb.example.com.`. Names outside the parent zone get no records there.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

import dns.name
import dns.rdatatype
import dns.update

from gslbd.config.discovery import ns_site
from gslbd.config.names import absolute
from gslbd.model.config import Config
from gslbd.model.tsig import TsigKey
from gslbd.model.zone import Zone
from gslbd.wire.tsig import keyring


class DelegationError(ValueError):
    """A delegation that cannot be built (bad parent, unknown zone, bad key); the text says why."""


def in_zone(name: str, origin: str) -> bool:
    """Is `name` the origin or below it? Both absolute, lower case."""
    return origin in (".", name) or name.endswith("." + origin)


def parent_of(origin: str) -> str:
    """The zone one label up: the default parent of a delegation."""
    if origin == ".":
        raise DelegationError("the root zone has no parent")
    rest = origin.split(".", 1)[1]
    return rest or "."


def owned_by(name: str, zone: str) -> bool:
    """Does an old nameserver name belong to this delegation, so that its stale address records may be
    removed? Names below the delegated zone (glue proper) and k8gb-style `gslb-ns-<site>-...` names of
    this zone (config/discovery.py) do; any other name may serve something else and is left alone."""
    return in_zone(name, zone) or ns_site(name, zone) is not None


@dataclass(frozen=True, slots=True)
class Glue:
    """One address record of a nameserver inside the parent zone."""

    name: str
    rtype: str  # "A" or "AAAA"
    address: str


@dataclass(frozen=True, slots=True)
class Delegation:
    """What the parent zone must hold for `zone`. Names are absolute and lower case."""

    zone: str
    parent: str
    ttl: int
    nameservers: tuple[str, ...]
    glue: tuple[Glue, ...]
    outside: tuple[str, ...] = ()  # nameservers outside the parent zone: no address records there
    missing: tuple[str, ...] = ()  # nameservers inside the parent zone with no address in the config
    ds: tuple[str, ...] = ()  # DS rdata of the zone's SEP keys when it is signed (docs/dnssec.md)

    def glue_names(self) -> tuple[str, ...]:
        """The nameserver names inside the parent zone whose address records this delegation sets."""
        return tuple(dict.fromkeys(g.name for g in self.glue))


def delegation_for(zone: Zone, *, parent: str | None = None, ttl: int | None = None) -> Delegation:
    """The delegation of one zone from `parent` (default: the zone one label up), TTL default the zone's."""
    parent = absolute(parent) if parent is not None else parent_of(zone.origin)
    if zone.origin == parent or not in_zone(zone.origin, parent):
        raise DelegationError(f"{zone.origin} is not below the parent zone {parent}")
    if not zone.nameservers:
        raise DelegationError(f"zone {zone.origin} has no nameservers to delegate to")
    if ttl is not None and not 0 <= ttl <= 2**31 - 1:
        raise DelegationError(f"TTL {ttl} is out of range (0 to 2147483647)")
    glue: list[Glue] = []
    outside: list[str] = []
    missing: list[str] = []
    for ns in zone.nameservers:
        if not in_zone(ns.name, parent):
            outside.append(ns.name)
        elif not ns.addresses:
            missing.append(ns.name)
        for address in ns.addresses if in_zone(ns.name, parent) else ():
            family = ipaddress.ip_address(address).version
            glue.append(Glue(ns.name, "A" if family == 4 else "AAAA", address))
    return Delegation(
        zone=zone.origin,
        parent=parent,
        ttl=zone.ttl if ttl is None else ttl,
        nameservers=tuple(n.name for n in zone.nameservers),
        glue=tuple(glue),
        outside=tuple(outside),
        missing=tuple(missing),
        ds=zone.dnssec.cds if zone.dnssec is not None else (),
    )


def delegations(
    config: Config, *, zones: Iterable[str] = (), parent: str | None = None, ttl: int | None = None
) -> tuple[Delegation, ...]:
    """The delegations of the named zones of `config` (every zone when `zones` is empty)."""
    wanted = [absolute(z) for z in zones]
    served = {z.origin: z for z in config.zones}
    unknown = [z for z in wanted if z not in served]
    if unknown:
        known = ", ".join(served) or "none"
        raise DelegationError(f"zone {', '.join(unknown)} is not in the config (its zones: {known})")
    chosen = [served[z] for z in dict.fromkeys(wanted)] if wanted else list(config.zones)
    if not chosen:
        raise DelegationError("the config serves no zone")
    return tuple(delegation_for(z, parent=parent, ttl=ttl) for z in chosen)


def zone_text(items: Iterable[Delegation], source: str | None = None) -> str:
    """The records in zone-file format (absolute names, one record per line), with comments."""
    lines: list[str] = []
    for d in items:
        if lines:
            lines.append("")
        origin = f" (from {source})" if source else ""
        lines.append(f"; delegation of {d.zone} in its parent zone {d.parent}{origin}")
        lines.extend(f"{d.zone}\t{d.ttl}\tIN\tNS\t{ns}" for ns in d.nameservers)
        lines.extend(f"{d.zone}\t{d.ttl}\tIN\tDS\t{ds}" for ds in d.ds)
        lines.extend(f"{g.name}\t{d.ttl}\tIN\t{g.rtype}\t{g.address}" for g in d.glue)
        lines.extend(
            f"; {name} is outside {d.parent}: its addresses are published by its own zone"
            for name in d.outside
        )
        lines.extend(
            f"; {name} is inside {d.parent} but has no address in the config: add its A/AAAA there"
            for name in d.missing
        )
    return "\n".join(lines) + "\n"


def update_message(
    d: Delegation, key: TsigKey | None = None, *, current_ns: Iterable[str] = ()
) -> dns.update.UpdateMessage:
    """The RFC 2136 update for the parent zone: replace the NS set of the delegated name, replace the
    A and AAAA sets of every nameserver inside the parent that has addresses in the config, and delete
    the address records of nameservers in `current_ns` (the set being replaced) that this delegation
    owns (see owned_by) and no longer uses. Signed with `key` when given."""
    if key is None:
        update = dns.update.UpdateMessage(d.parent)
    else:
        update = dns.update.UpdateMessage(
            d.parent, keyring=keyring(key), keyname=dns.name.from_text(key.name), keyalgorithm=key.algorithm
        )
    update.replace(d.zone, d.ttl, dns.rdatatype.NS, *d.nameservers)
    if d.ds:  # a signed zone: its DS set (an unsigned zone's DS set is left alone)
        update.replace(d.zone, d.ttl, dns.rdatatype.DS, *d.ds)
    for name in d.glue_names():
        for rtype in ("A", "AAAA"):
            addresses = [g.address for g in d.glue if g.name == name and g.rtype == rtype]
            if addresses:
                update.replace(name, d.ttl, rtype, *addresses)
            else:
                update.delete(name, rtype)
    for name in stale_names(d, current_ns):
        update.delete(name, dns.rdatatype.A)
        update.delete(name, dns.rdatatype.AAAA)
    return update


def stale_names(d: Delegation, current_ns: Iterable[str]) -> tuple[str, ...]:
    """The old nameservers whose address records update_message deletes, sorted (the server returns
    its NS set in any order)."""
    keep = set(d.nameservers)
    return tuple(
        sorted(
            name
            for name in {absolute(n) for n in current_ns}
            if name not in keep and in_zone(name, d.parent) and owned_by(name, d.zone)
        )
    )
