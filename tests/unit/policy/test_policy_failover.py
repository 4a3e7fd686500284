"""failover: the preferred site with candidates answers alone, lowest priority tier first."""

from __future__ import annotations

import random

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, NoLocator, Plan, PolicyEnv
from gslbd.policy.failover import Failover
from gslbd.policy.round_robin import RotationPlan
from gslbd.types import EndpointKind, PolicyName

NAME = "app.gslb.example.com."


def ep(address: str, site: str, priority: int = 0) -> Endpoint:
    return Endpoint(NAME, address, EndpointKind.IPV4, site, priority=priority)


EU1, EU2 = ep("192.0.2.1", "eu"), ep("192.0.2.2", "eu")
EU_BACKUP = ep("192.0.2.9", "eu", priority=1)
US1 = ep("198.51.100.1", "us")
AP1, AP2 = ep("203.0.113.1", "ap", priority=1), ep("203.0.113.2", "ap")
SA1 = ep("203.0.113.100", "sa")


def plan_for(candidates: tuple[Endpoint, ...], order: tuple[str, ...], max_answers: int = 8) -> Plan:
    service = Service(
        NAME, "gslb.example.com.", "app", PolicyName.FAILOVER, failover_order=order, max_answers=max_answers
    )
    return Failover().plan(candidates, service, PolicyEnv(NoLocator(), {}, random.Random(1)))


def answers(plan: Plan) -> set[tuple[str, ...]]:
    return {tuple(e.address for e in v) for v in plan.variants}


def test_first_listed_site_with_candidates_answers_alone() -> None:
    plan = plan_for((US1, EU1, EU2), ("eu", "us"))
    assert answers(plan) == {("192.0.2.1", "192.0.2.2"), ("192.0.2.2", "192.0.2.1")}


def test_next_site_answers_when_the_first_has_no_candidates() -> None:
    plan = plan_for((US1, AP2), ("eu", "us", "ap"))
    assert plan == FixedPlan(
        (US1,), "failover: site us (preference 2 of 3) answers; priority tier 0 has 1 candidate(s)"
    )


def test_failback_once_the_preferred_site_has_candidates_again() -> None:
    assert answers(plan_for((US1,), ("eu", "us"))) == {("198.51.100.1",)}
    assert answers(plan_for((EU1, US1), ("eu", "us"))) == {("192.0.2.1",)}


def test_only_the_lowest_priority_tier_answers() -> None:
    plan = plan_for((EU_BACKUP, EU1), ("eu",))
    assert answers(plan) == {("192.0.2.1",)}


def test_higher_tier_answers_when_the_lower_has_no_candidates() -> None:
    plan = plan_for((EU_BACKUP, US1), ("eu", "us"))
    assert plan == FixedPlan(
        (EU_BACKUP,), "failover: site eu (preference 1 of 2) answers; priority tier 1 has 1 candidate(s)"
    )


def test_unlisted_sites_come_after_listed_ones_together_by_tier() -> None:
    plan = plan_for((AP1, AP2, SA1), ("eu", "us"))
    assert answers(plan) == {("203.0.113.2", "203.0.113.100"), ("203.0.113.100", "203.0.113.2")}
    assert plan.explain(0, False) == [
        "failover: sites not in failover_order (ap, sa), no listed site has candidates answers; "
        "priority tier 0 has 2 candidate(s)",
        "failover: 2 rotations of that tier, one per query in turn",
    ]


def test_listed_site_beats_unlisted_ones() -> None:
    assert answers(plan_for((AP2, SA1, US1), ("eu", "us"))) == {("198.51.100.1",)}


def test_empty_failover_order_treats_every_site_as_one_group() -> None:
    plan = plan_for((EU1, US1, EU_BACKUP), ())
    assert answers(plan) == {("192.0.2.1", "198.51.100.1"), ("198.51.100.1", "192.0.2.1")}


def test_tier_rotates_per_query_so_each_is_first_equally_often() -> None:
    eu3 = ep("192.0.2.3", "eu")
    plan = plan_for((EU1, EU2, eu3), ("eu",), max_answers=2)
    assert isinstance(plan, RotationPlan)
    rng = random.Random(0)
    firsts = [plan.variants[plan.pick(0, False, rng, seq)][0].address for seq in range(6)]
    assert firsts == ["192.0.2.1", "192.0.2.2", "192.0.2.3"] * 2
    assert all(len(v) == 2 for v in plan.variants)
    assert plan.location_dependent is False
