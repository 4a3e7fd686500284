"""Locality names: `<label>.<zone>.<region>.<origin>` and `<label>.<region>.<origin>` per service.

For every service with `locality_names: true` (naming and declared localities: `gslbd.config.locality`):

- a level (a zone, or a region) with at least one healthy endpoint answers its healthy endpoints:
  A and AAAA from the candidates of that family there, ordered by the level's policy (below); a
  family with no healthy candidate there is NODATA, as at any name that holds only the other family;
- a level with no healthy endpoint at all is a CNAME to the next wider level (zone -> region ->
  the service's global name). CNAME and other data cannot share a name, so whether a level answers
  or points onwards is decided for the name as a whole, never per type.
- the global name keeps the service's policy, and its `all_down` when nothing is healthy anywhere.

The CNAME chain is followed inside the zone like every in-zone CNAME (answer/chain.py, RFC 1034
4.3.2): a question at a level that points onwards is answered with the CNAME(s) and the answer of the
first level that answers, so a resolver gets the whole chain in one round trip. A chain that ends in
NODATA or all_down's NXDOMAIN carries that rcode and the zone's SOA; one that ends in all_down's
SERVFAIL is the CNAMEs alone, and the resolver asks the target itself.

The level's policy is the service's one for round_robin, random, weighted, hash and failover (site
order and priority tiers among the level's candidates); geo becomes round_robin, because the level
already is the client's choice of place and the answer then does not depend on the client.

A locality name that is already a name of the view (a service, a static record, a nameserver, the
exchange's names, or an earlier service's locality name), or that lies in a more specific served
zone, is left out: the config check reports such names for the localities it knows, and the
localities that only peers publish lose to everything the config defines.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import replace

from gslbd.answer.exchange_names import merged_endpoints, peer_site_names
from gslbd.answer.view import (
    SERVICE_TYPES,
    Dynamic,
    NameData,
    Negative,
    Outcome,
    Records,
    Rr,
    family_candidates,
)
from gslbd.config.locality import MAX_NAME_TEXT, Level, levels, site_localities
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Zone
from gslbd.policy import PolicyEnv, get_policy
from gslbd.state.snapshot import Snapshot, effective_up
from gslbd.types import PolicyName, Rcode

# Policies that make no sense inside one level, and what the level uses instead.
LEVEL_POLICY = {PolicyName.GEO: PolicyName.ROUND_ROBIN}


def level_policy(policy: PolicyName) -> PolicyName:
    """The policy that orders the endpoints of one locality level of a service with `policy`."""
    return LEVEL_POLICY.get(policy, policy)


def locality_names(
    service: Service,
    top: NameData,
    taken: Container[str],
    config: Config,
    snapshot: Snapshot,
    env: PolicyEnv,
) -> dict[str, NameData]:
    """The locality names of one service with `locality_names` (none without it). `top` is the
    service's global name with its outcomes; names in `taken` (every other name of the view) are left out."""
    if not service.locality_names:
        return {}
    zones = {z.origin: z for z in config.zones}
    # The candidates are those of the global name (a peer site's configured endpoints give way to
    # what that site publishes); every configured endpoint still declares its locality.
    endpoints = merged_endpoints(service, snapshot, peer_site_names(config))
    zone = zones[service.zone]
    declared = levels(
        service, [e.locality for e in service.endpoints + endpoints] + list(site_localities(config))
    )
    made: dict[str, NameData] = {}
    for level in declared:  # regions come first, so a zone's region is decided before the zone
        if level.name in taken or level.name == top.name or len(level.name) > MAX_NAME_TEXT:
            continue
        if _owner_zone(level.name, zones) != service.zone:
            continue
        region = made.get(_region_name(declared, level))
        parent = top if region is None else region
        members = tuple(e for e in endpoints if level.holds(e.locality))
        data = NameData(level.name, zone)
        data.outcomes.update(_level_outcomes(service, level, members, parent, snapshot, env))
        made[level.name] = data
    return made


def _level_outcomes(
    service: Service,
    level: Level,
    members: tuple[Endpoint, ...],
    parent: NameData,
    snapshot: Snapshot,
    env: PolicyEnv,
) -> dict[str, Outcome]:
    """A level's answers: its healthy endpoints, or a CNAME to `parent` followed inside the zone."""
    healthy = tuple(e for e in members if effective_up(e, snapshot))
    where = level.where()
    out: dict[str, Outcome] = {}
    if healthy:
        policy = level_policy(service.policy)
        own = replace(service, name=level.name, policy=policy, endpoints=members)
        for rtype in SERVICE_TYPES:
            family = family_candidates(healthy, rtype)
            if not family:
                what = "hostname" if rtype == "CNAME" else rtype
                out[rtype] = Negative(
                    Rcode.NOERROR,
                    f"{where} has healthy endpoints but no healthy {what} endpoint (NODATA, not a CNAME: "
                    "the name holds other data)",
                )
                continue
            total = len(family_candidates(members, rtype))
            plan = get_policy(policy).plan(family, own, env)
            reason = (
                f"{where}: {len(family)} of {total} {rtype} candidates healthy, ordered by {policy.value}"
            )
            out[rtype] = Dynamic(own, rtype, plan, reason)
        return out
    cname = Rr(level.name, "CNAME", service.ttl, parent.name)
    pointer = Records((cname,))
    # Every type but CNAME and ANY follows the CNAME inside the zone (answer/chain.py).
    out["CNAME"] = out["ANY"] = pointer
    return out


def _region_name(declared: tuple[Level, ...], level: Level) -> str:
    """The name of the region level a zone level belongs to ("" for a region level)."""
    if level.zone is None:
        return ""
    for other in declared:
        if other.zone is None and other.region == level.region:
            return other.name
    return ""


def _owner_zone(name: str, zones: dict[str, Zone]) -> str | None:
    """The most specific served zone that contains `name`."""
    current = name
    while current not in zones:
        if current == ".":
            return None
        current = current[current.find(".") + 1 :] or "."
    return current
