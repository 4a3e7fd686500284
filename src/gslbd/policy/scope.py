"""The ECS scope of a plan's answer (RFC 7871 7.2.1): the prefix length of the client address that the
plan used to choose, so that a resolver caches the answer for exactly the clients who get the same.

One function decides it for every path (the C table, the Python fast path, the slow path): `plan_scope`
gives the plan's own scope for a client, and `echoed` caps it at the query's source prefix (never more
specific than what the resolver sent). What a plan used:

- hash (`RendezvousPlan`, `WeightedRendezvousPlan`): the client's /24 or /56;
- geo (`GeoPlan`): the topology networks that decide the client's longest prefix match (the matched
  network's length, longer when a network nested in it lies near the client), and for a client outside
  every network the GeoIP record's network (`TopologyLocator.scope`);
- pools (`PoolPlan`): what the rules up to the one the client matches tested (`networks`: those
  networks; `sites`, `countries`, `continents`: the location, as geo; `asn`: the ASN record's network),
  and the scope of the pool's own plan; rules that follow from the location alone (the ones the C table
  places per topology network) take the location's scope;
- a plan that does not depend on the client: 0; any other client-dependent choice (a CNAME chain through
  several policies): the whole address, so the source prefix is echoed.

`client_class` is the same decision for the C table's GeoIP prefix cache: the candidate set a client
gets and that scope, computed once in Python and kept by C for the client's prefix.
"""

from __future__ import annotations

from gslbd.policy.base import NoLocator
from gslbd.policy.geo import GeoPlan
from gslbd.policy.load import ShedPlan
from gslbd.policy.locate import TopologyLocator, covering_bits, family_bits
from gslbd.policy.pools import PoolPlan
from gslbd.policy.rendezvous import V4_SHIFT, V6_SHIFT, RendezvousPlan, WeightedRendezvousPlan

HASH_SCOPE = (32 - V4_SHIFT, 128 - V6_SHIFT)  # the /24 and /56 the hash keys on


def echoed(scope: int, source: int) -> int:
    """The SCOPE PREFIX-LENGTH sent for a plan's `scope` and the query's SOURCE PREFIX-LENGTH."""
    return scope if scope < source else source


def plan_scope(plan: object, ip: int, v6: bool) -> int:
    """The prefix length of (ip, v6) that `plan`'s choice for that client depends on (see above)."""
    if isinstance(plan, RendezvousPlan | WeightedRendezvousPlan):
        return HASH_SCOPE[v6]
    if isinstance(plan, GeoPlan):
        return _location_scope(plan.locator, ip, v6, asn=False)
    if isinstance(plan, PoolPlan):
        return _pool_scope(plan, ip, v6)
    if isinstance(plan, ShedPlan):  # the draw is the client's no more than any level's choice
        return max(plan_scope(level, ip, v6) for level in plan.levels)
    if not getattr(plan, "location_dependent", True):
        return 0
    return family_bits(v6)


def client_class(plan: object, ip: int, v6: bool) -> tuple[int, int] | None:
    """The candidate set (class) a geo or pools plan gives the client, and the scope of that answer;
    None for other plans."""
    if isinstance(plan, GeoPlan):
        return plan.classify(ip, v6)[0], plan_scope(plan, ip, v6)
    if isinstance(plan, PoolPlan):
        rule = plan.rule_of(plan.locator.locate(ip, v6), ip, v6)
        return plan.rule_class[rule], plan_scope(plan, ip, v6)
    return None


def _location_scope(locator: object, ip: int, v6: bool, asn: bool) -> int:
    if isinstance(locator, TopologyLocator):
        return locator.scope(ip, v6, asn)
    if isinstance(locator, NoLocator):  # every client is unknown alike
        return 0
    return family_bits(v6)


def _pool_scope(plan: PoolPlan, ip: int, v6: bool) -> int:
    loc = plan.locator.locate(ip, v6)
    chosen = plan.rule_of(loc, ip, v6)
    if plan.by_location:  # the C table's per-location classes: the location's scope, whatever rule
        scope = _location_scope(plan.locator, ip, v6, asn=False)
    else:
        tested = plan.rules[: chosen + 1]
        located = any(r.sites or r.countries or r.continents for r in tested)
        asn = any(r.asns for r in tested)
        scope = _location_scope(plan.locator, ip, v6, asn) if located or asn else 0
        nets = tuple(
            (int(n.network_address), n.prefixlen)
            for r in tested
            for n in r.networks
            if (n.version == 6) == v6
        )
        scope = max(scope, covering_bits(ip, family_bits(v6), nets))
    inner = plan.inner[plan.rule_class[chosen]]
    return max(scope, plan_scope(inner, ip, v6))
