"""select first_n: the first max_answers of the policy's whole order, the chosen group first."""

from __future__ import annotations

import random
from dataclasses import replace

from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality, SiteInfo
from gslbd.policy import get_policy
from gslbd.policy.base import NoLocator, Plan, PolicyEnv
from gslbd.policy.rendezvous import Rendezvous
from gslbd.policy.select import by_weight, followed_by
from gslbd.types import EndpointKind, PolicyName, Select

NAME = "app.gslb.example.com."
SITES = {
    "eu": SiteInfo("eu", Locality("europe"), (50.1, 8.7)),
    "eu2": SiteInfo("eu2", Locality("europe2"), (50.4, 3.8)),
    "us": SiteInfo("us", Locality("america"), (39.0, -77.5)),
    "ap": SiteInfo("ap", Locality("asia"), (1.35, 103.8)),
}


def ep(address: str, site: str, priority: int = 0, weight: int = 1) -> Endpoint:
    return Endpoint(NAME, address, EndpointKind.IPV4, site, priority=priority, weight=weight)


EU1, EU2, EU_BACKUP = ep("192.0.2.1", "eu"), ep("192.0.2.2", "eu"), ep("192.0.2.9", "eu", priority=1)
BE = ep("192.0.2.30", "eu2")
US1 = ep("198.51.100.1", "us")
AP1 = ep("203.0.113.1", "ap")


def plan_for(
    policy: PolicyName, candidates: tuple[Endpoint, ...], max_answers: int, **changes: object
) -> Plan:
    service = replace(
        Service(NAME, "gslb.example.com.", "app", policy, max_answers=max_answers, select=Select.FIRST_N),
        **changes,
    )
    return get_policy(policy).plan(candidates, service, PolicyEnv(NoLocator(), SITES, random.Random(1)))


def answers(plan: Plan) -> list[tuple[str, ...]]:
    return [tuple(e.address for e in v) for v in plan.variants]


def test_followed_by_keeps_the_first_and_cuts_to_count() -> None:
    assert followed_by((EU2, EU1), (EU1, US1, AP1), 3) == (EU2, EU1, US1)
    assert followed_by((EU2, EU1), (US1,), 1) == (EU2,)


def test_by_weight_orders_by_descending_weight_and_drops_weight_zero_while_a_positive_exists() -> None:
    assert by_weight([(EU1, 1), (US1, 5), (AP1, 0), (EU2, 5)]) == [US1, EU2, EU1]
    assert by_weight([(EU1, 0), (US1, 0)]) == [EU1, US1]


def test_failover_answers_the_tier_rotated_then_the_rest_of_the_failover_order() -> None:
    plan = plan_for(PolicyName.FAILOVER, (AP1, US1, EU_BACKUP, EU1, EU2), 4, failover_order=("eu", "us"))
    assert answers(plan) == [
        ("192.0.2.1", "192.0.2.2", "192.0.2.9", "198.51.100.1"),
        ("192.0.2.2", "192.0.2.1", "192.0.2.9", "198.51.100.1"),
    ]
    assert "select first_n" in plan.explain(0, False)[-1]


def test_failover_with_one_preferred_endpoint_still_carries_its_backups() -> None:
    plan = plan_for(PolicyName.FAILOVER, (AP1, US1, EU1), 8, failover_order=("us", "eu"))
    assert answers(plan) == [("198.51.100.1", "192.0.2.1", "203.0.113.1")]


def test_rotate_is_todays_answer_the_chosen_group_alone() -> None:
    plan = plan_for(
        PolicyName.FAILOVER, (US1, EU1, EU2), 4, failover_order=("eu", "us"), select=Select.ROTATE
    )
    assert answers(plan) == [("192.0.2.1", "192.0.2.2"), ("192.0.2.2", "192.0.2.1")]


def test_weighted_sites_answer_the_drawn_site_then_the_others_by_weight() -> None:
    plan = plan_for(PolicyName.WEIGHTED, (EU1, US1, AP1), 2, weights=(("eu", 1), ("us", 5), ("ap", 3)))
    assert answers(plan) == [
        ("192.0.2.1", "198.51.100.1"),
        ("198.51.100.1", "203.0.113.1"),
        ("203.0.113.1", "198.51.100.1"),
    ]


def test_weighted_endpoints_leave_a_drained_endpoint_out_of_the_backups() -> None:
    drained = replace(AP1, weight=0)
    plan = plan_for(PolicyName.WEIGHTED, (replace(EU1, weight=2), US1, drained), 3)
    assert answers(plan) == [("192.0.2.1", "198.51.100.1"), ("198.51.100.1", "192.0.2.1")]


def test_hash_keeps_the_clients_endpoint_first_and_a_fixed_backup_order_per_endpoint() -> None:
    candidates = (EU1, EU2, US1, AP1)
    first_n = plan_for(PolicyName.HASH, candidates, 2)
    rotate = plan_for(PolicyName.HASH, candidates, 2, select=Select.ROTATE)
    assert isinstance(get_policy(PolicyName.HASH), Rendezvous)
    for ip in range(0, 2**32, 2**32 // 500):
        got = first_n.variants[first_n.pick(ip, False, random.Random(0), 0)]
        assert got[0] == rotate.variants[rotate.pick(ip, False, random.Random(0), 0)][0]
        assert len(got) == 2 and got[1] != got[0]
    backups = {v[0].address: v[1].address for v in first_n.variants}
    assert len(set(backups.values())) > 1  # the backups spread over the candidates


def test_geo_answers_the_nearest_set_then_the_next_nearest_sites() -> None:
    plan = plan_for(PolicyName.GEO, (AP1, US1, BE, EU1), 3)
    # The eu set (Frankfurt) is followed by Belgium, then Ashburn; the us set by Belgium and Frankfurt.
    by_first = {v[0].address: tuple(e.address for e in v) for v in plan.variants}
    assert by_first["192.0.2.1"] == ("192.0.2.1", "192.0.2.30", "198.51.100.1")
    assert by_first["198.51.100.1"] == ("198.51.100.1", "192.0.2.30", "192.0.2.1")
    assert by_first["203.0.113.1"] == ("203.0.113.1", "192.0.2.1", "192.0.2.30")


def test_geo_bias_orders_the_backups_too() -> None:
    plan = plan_for(PolicyName.GEO, (AP1, US1, BE, EU1), 2, bias=(("us", 99),))
    by_first = {v[0].address: tuple(e.address for e in v) for v in plan.variants}
    assert by_first["192.0.2.1"] == ("192.0.2.1", "198.51.100.1")
