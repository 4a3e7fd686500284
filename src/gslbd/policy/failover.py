"""failover: the most preferred site that has candidates answers alone.

Sites are taken in `failover_order`; the sites not listed there come after the listed ones, as one
group. Inside the chosen site (or group) only the lowest `priority` tier that has candidates answers,
rotated per query like round_robin so that load spreads inside the tier. Failback is automatic: plans
are rebuilt from the candidates whenever health changes.

With `select: first_n` the tier is followed by the rest of the failover order (the same site's higher
priority tiers, then the next sites in `failover_order`, the unlisted sites last, by priority), cut to
max_answers: the backups ride along in the answer.
"""

from __future__ import annotations

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, Plan, PolicyEnv
from gslbd.policy.round_robin import RotationPlan, rotations
from gslbd.policy.select import followed_by
from gslbd.types import Select


def choose_group(candidates: tuple[Endpoint, ...], order: tuple[str, ...]) -> tuple[str, list[Endpoint]]:
    """The preferred group of candidates and a description of it: the first listed site that has
    candidates, else every candidate of an unlisted site."""
    for site in order:
        members = [e for e in candidates if e.site == site]
        if members:
            return f"site {site} (preference {order.index(site) + 1} of {len(order)})", members
    listed = set(order)
    rest = [e for e in candidates if e.site not in listed]
    sites = ", ".join(dict.fromkeys(e.site for e in rest))
    if order:
        return f"sites not in failover_order ({sites}), no listed site has candidates", rest
    return f"every site ({sites}), failover_order is empty", rest


class Failover:
    name = "failover"

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        where, members = choose_group(candidates, service.failover_order)
        best = min(e.priority for e in members)
        tier = tuple(e for e in members if e.priority == best)
        reason = f"failover: {where} answers; priority tier {best} has {len(tier)} candidate(s)"
        if service.select is Select.FIRST_N:
            return _first_n(candidates, service, tier, reason)
        if len(tier) == 1:
            return FixedPlan(tier, reason)
        turn = f"failover: {len(tier)} rotations of that tier, one per query in turn"
        return RotationPlan(rotations(tier, service.max_answers), (reason, turn))


def _first_n(
    candidates: tuple[Endpoint, ...], service: Service, tier: tuple[Endpoint, ...], reason: str
) -> Plan:
    order = service.failover_order
    rank = {site: i for i, site in enumerate(order)}
    rest = sorted(candidates, key=lambda e: (rank.get(e.site, len(order)), e.priority))
    then = f"select first_n: then the rest of the failover order, up to {service.max_answers}"
    if len(tier) == 1:
        return FixedPlan(followed_by(tier, rest, service.max_answers), f"{reason}; {then}")
    turn = f"failover: {len(tier)} rotations of that tier, one per query in turn"
    variants = tuple(followed_by(r, rest, service.max_answers) for r in rotations(tier, len(tier)))
    return RotationPlan(variants, (reason, turn, f"failover: {then}"))
