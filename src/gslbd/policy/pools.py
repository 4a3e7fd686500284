"""pools and rules: ordered pools per client location, with fallback chains (octoDNS / NS1 / gdnsd style).

A service with `pools` and `rules` answers each client from one pool: the first rule whose conditions
the client matches names a pool; while that pool has fewer than its `min_healthy` candidates up, its
`fallback` is taken instead, and so on down the chain; when no pool of the chain has enough, every
candidate of the service answers. Inside the pool reached, the service's own `policy` chooses (a
failover order, weights, a hash, geo ...) over that pool's candidates.

A rule matches a client when every condition it gives matches (inside one condition any listed value
does): `networks` (the client address), `sites` (the client's topology site), `countries` and
`continents` (from the GeoIP database), `asn` (from the ASN database). The last rule is the catch-all
(no condition), so every client reaches a pool.

Every distinct pool reached is planned once per health change; a query only classifies its client
(cached per plan, as geo does) and lets that pool's plan pick. Rules that do not test the client
address are decided per location, so the C table precomputes them per topology network as it does
geo (`classify_location`); rules with `networks` or `asn` are placed by this plan in Python once per
client prefix, and C keeps that (wire/_geocache.c); a pool's plan that draws, hashes or is geo is its
own C entry per class (wire/_pools.c). policy/scope.py gives the ECS scope per rule kind.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from gslbd.model.service import Endpoint, Pool, Rule, Service
from gslbd.model.topology import IPNetwork
from gslbd.policy.base import FixedPlan, Location, Locator, Plan, Policy, PolicyEnv
from gslbd.policy.round_robin import RotationPlan

CACHE_LIMIT = 100_000
EVERYONE = "every candidate (no pool of the chain has enough)"


def rule_matches(rule: Rule, loc: Location, ip: int | None, v6: bool) -> bool:
    """Whether a client at `loc` (address `ip`, None: not known here) matches every condition of `rule`."""
    if rule.sites and loc.site not in rule.sites:
        return False
    if rule.countries and loc.country not in rule.countries:
        return False
    if rule.continents and loc.continent not in rule.continents:
        return False
    if rule.asns and loc.asn not in rule.asns:
        return False
    if rule.networks:
        if ip is None:
            raise ValueError("a networks rule needs the client address")
        return any(_contains(net, ip, v6) for net in rule.networks)
    return True


def _contains(net: IPNetwork, ip: int, v6: bool) -> bool:
    if (net.version == 6) != v6:
        return False
    shift = net.max_prefixlen - net.prefixlen
    return ip >> shift == int(net.network_address) >> shift


def resolve_chain(
    pools: Mapping[str, Pool], start: str, candidates: tuple[Endpoint, ...]
) -> tuple[str | None, tuple[Endpoint, ...], tuple[str, ...]]:
    """The pool reached from `start` (None: none has enough, every candidate answers), its candidates,
    and why each pool passed over was (for explain). The config refuses loops."""
    passed: list[str] = []
    name: str | None = start
    while name is not None:
        pool = pools[name]
        members = tuple(e for e in candidates if pool.holds(e))
        if len(members) >= pool.min_healthy:
            return name, members, tuple(passed)
        passed.append(f"pool {name} has {len(members)} of min_healthy {pool.min_healthy} up")
        name = pool.fallback
    return None, candidates, tuple(passed)


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """The plans of the pools reached laid end to end: class c owns variants starts[c] .. +counts[c];
    rule i sends its clients to class rule_class[i]."""

    variants: tuple[tuple[Endpoint, ...], ...]
    starts: tuple[int, ...]
    counts: tuple[int, ...]
    inner: tuple[Plan, ...]  # per class: the service's policy over that pool's candidates
    names: tuple[str, ...]  # per class: what it is, for explain
    rules: tuple[Rule, ...]
    rule_class: tuple[int, ...]
    passed: tuple[tuple[str, ...], ...]  # per rule: the pools its chain passed over, and why
    locator: Locator = field(compare=False)
    cache4: dict[int, int] = field(default_factory=dict, compare=False)
    cache6: dict[int, int] = field(default_factory=dict, compare=False)

    @property
    def location_dependent(self) -> bool:
        return True

    @property
    def seq_picked(self) -> bool:
        """Whether every pool's plan picks by the query counter alone: then the C table answers it as it
        answers geo, from a class per client (else with each class's plan as its own entry: drawing,
        hashing and geo plans)."""
        return all(isinstance(p, FixedPlan | RotationPlan) for p in self.inner)

    @property
    def by_location(self) -> bool:
        """Whether a client's class follows from its location alone (no rule tests the address or the
        ASN): then C precomputes the class per topology network; with rules that test the address or
        the ASN, C keeps each client prefix's class once Python has placed it. Whatever the pools'
        plans (those that draw, hash or are geo answer in C as their own entries, wire/_pools.c)."""
        return not any(r.networks or r.asns for r in self.rules)

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        cache = self.cache6 if v6 else self.cache4
        chosen = cache.get(ip)
        if chosen is None:
            chosen = self.rule_class[self.rule_of(self.locator.locate(ip, v6), ip, v6)]
            if len(cache) >= CACHE_LIMIT:
                cache.clear()
            cache[ip] = chosen
        return self.starts[chosen] + self.inner[chosen].pick(ip, v6, rng, seq)

    def rule_of(self, loc: Location, ip: int | None, v6: bool) -> int:
        """The index of the first rule the client matches (the last rule is the catch-all)."""
        for i, rule in enumerate(self.rules):
            if rule_matches(rule, loc, ip, v6):
                return i
        return len(self.rules) - 1

    def classify_location(self, loc: Location) -> tuple[int, str]:
        """The class of a client at `loc` when no rule tests the address (the C table's per-location
        table); `by_location` says when that holds."""
        i = self.rule_of(loc, None, False)
        return self.rule_class[i], f"rule {i + 1}"

    def explain(self, ip: int, v6: bool) -> list[str]:
        i = self.rule_of(self.locator.locate(ip, v6), ip, v6)
        rule, chosen = self.rules[i], self.rule_class[i]
        what = "the catch-all" if rule.catch_all else "the first rule the client matches"
        lines = [f"pools: rule {i + 1} ({what}) -> pool {rule.pool}"]
        lines.extend(f"pools: {why}: its fallback is taken" for why in self.passed[i])
        lines.append(f"pools: {self.names[chosen]} answers")
        return lines + self.inner[chosen].explain(ip, v6)


class PoolPlanner:
    """Plans a service with pools: the service's policy inside each pool reached."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        pools = {p.name: p for p in service.pools}
        reached: dict[str | None, int] = {}
        variants: list[tuple[Endpoint, ...]] = []
        starts: list[int] = []
        counts: list[int] = []
        inner: list[Plan] = []
        names: list[str] = []
        rule_class: list[int] = []
        passed: list[tuple[str, ...]] = []
        for rule in service.rules:
            name, members, why = resolve_chain(pools, rule.pool, candidates)
            found = reached.get(name)
            if found is None:
                plan = self.inner.plan(members, service, env)
                found = reached[name] = len(inner)
                starts.append(len(variants))
                counts.append(len(plan.variants))
                variants.extend(plan.variants)
                inner.append(plan)
                names.append(
                    f"pool {name}"
                    if name is not None
                    else "every candidate (no pool of the chain has enough)"
                )
            rule_class.append(found)
            passed.append(why)
        if len(inner) == 1:  # every rule reaches the same pool: no client dependence from the pools
            return inner[0]
        return PoolPlan(
            tuple(variants),
            tuple(starts),
            tuple(counts),
            tuple(inner),
            tuple(names),
            service.rules,
            tuple(rule_class),
            tuple(passed),
            env.locator,
        )
