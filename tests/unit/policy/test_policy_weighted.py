"""weighted: the split of queries follows the weights, per query."""

from __future__ import annotations

import random
from collections import Counter

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, NoLocator, Plan, PolicyEnv
from gslbd.policy.weighted import Weighted, WeightedPlan
from gslbd.types import EndpointKind, PolicyName

NAME = "app.gslb.example.com."


def ep(address: str, site: str, weight: int = 1) -> Endpoint:
    return Endpoint(NAME, address, EndpointKind.IPV4, site, weight=weight)


EU = (ep("192.0.2.1", "eu"), ep("192.0.2.2", "eu"))
US = (ep("198.51.100.1", "us"),)
AP = (ep("203.0.113.1", "ap"), ep("203.0.113.2", "ap"))


def service(weights: tuple[tuple[str, int], ...] | None, max_answers: int = 8) -> Service:
    return Service(
        NAME, "gslb.example.com.", "app", PolicyName.WEIGHTED, weights=weights, max_answers=max_answers
    )


def plan_for(candidates: tuple[Endpoint, ...], weights: tuple[tuple[str, int], ...] | None) -> Plan:
    return Weighted().plan(candidates, service(weights), PolicyEnv(NoLocator(), {}, random.Random(1)))


def shares(plan: Plan, key: str = "site", queries: int = 10_000) -> dict[str, float]:
    rng = random.Random(2024)
    counts: Counter[str] = Counter()
    for seq in range(queries):
        first = plan.variants[plan.pick(0, False, rng, seq)][0]
        counts[first.site if key == "site" else first.address] += 1
    return {k: v / queries for k, v in counts.items()}


def test_site_weights_70_30_hold_over_10000_queries() -> None:
    result = shares(plan_for(EU + US, (("eu", 70), ("us", 30))))
    assert abs(result["eu"] - 0.70) < 0.02
    assert abs(result["us"] - 0.30) < 0.02


def test_three_site_split_50_30_20() -> None:
    result = shares(plan_for(EU + US + AP, (("eu", 50), ("us", 30), ("ap", 20))))
    assert abs(result["eu"] - 0.5) < 0.02
    assert abs(result["us"] - 0.3) < 0.02
    assert abs(result["ap"] - 0.2) < 0.02


def test_a_drawn_site_answers_all_its_candidates_in_order() -> None:
    plan = plan_for(EU + US, (("eu", 70), ("us", 30)))
    assert isinstance(plan, WeightedPlan)
    assert plan.variants == (EU, US)
    assert plan.shares() == (0.7, 0.3)


def test_site_variants_are_cut_to_max_answers() -> None:
    env = PolicyEnv(NoLocator(), {}, random.Random(1))
    plan = Weighted().plan(EU + US, service((("eu", 1), ("us", 1)), max_answers=1), env)
    assert plan.variants == (EU[:1], US)


def test_weight_of_a_site_without_candidates_goes_to_the_others() -> None:
    result = shares(plan_for(US + AP, (("eu", 70), ("us", 30), ("ap", 10))))
    assert abs(result["us"] - 0.75) < 0.02
    assert abs(result["ap"] - 0.25) < 0.02


def test_site_not_listed_in_weights_never_answers_while_another_can() -> None:
    plan = plan_for(EU + US + AP, (("eu", 60), ("us", 40)))
    assert {v[0].site for v in plan.variants} == {"eu", "us"}
    assert "ap" not in shares(plan)


def test_site_with_weight_zero_never_answers_while_another_can() -> None:
    plan = plan_for(EU + US, (("eu", 0), ("us", 5)))
    assert plan == FixedPlan(US, "weighted: only us has a positive weight among the candidates")


def test_all_zero_weights_share_queries_equally() -> None:
    plan = plan_for(EU + AP, (("eu", 0), ("us", 10)))
    result = shares(plan)
    assert abs(result["eu"] - 0.5) < 0.02
    assert abs(result["ap"] - 0.5) < 0.02
    assert plan.explain(0, False) == [
        "weighted: one site drawn per query by weight: eu 1 (50.0%), ap 1 (50.0%)"
    ]


def test_all_zero_weights_with_one_site_answer_that_site() -> None:
    plan = plan_for(AP, (("eu", 10),))
    assert plan == FixedPlan(
        AP, "weighted: every site with candidates has weight 0, so all are drawn equally"
    )


def test_endpoint_weights_3_to_1_without_site_weights() -> None:
    candidates = (ep("192.0.2.1", "eu", weight=3), ep("192.0.2.2", "eu", weight=1))
    plan = plan_for(candidates, None)
    assert plan.variants == ((candidates[0],), (candidates[1],))
    result = shares(plan, key="address")
    assert abs(result["192.0.2.1"] - 0.75) < 0.02
    assert abs(result["192.0.2.2"] - 0.25) < 0.02


def test_endpoint_weight_zero_is_drained() -> None:
    candidates = (
        ep("192.0.2.1", "eu", weight=0),
        ep("192.0.2.2", "eu", weight=2),
        ep("192.0.2.3", "eu", weight=2),
    )
    plan = plan_for(candidates, None)
    assert [v[0].address for v in plan.variants] == ["192.0.2.2", "192.0.2.3"]
    result = shares(plan, key="address")
    assert "192.0.2.1" not in result
    assert abs(result["192.0.2.2"] - 0.5) < 0.02


def test_all_endpoint_weights_zero_fall_back_to_equal_draws() -> None:
    candidates = (ep("192.0.2.1", "eu", weight=0), ep("192.0.2.2", "eu", weight=0))
    result = shares(plan_for(candidates, None), key="address")
    assert abs(result["192.0.2.1"] - 0.5) < 0.02


def test_one_endpoint_without_site_weights_is_fixed() -> None:
    assert plan_for(US, None) == FixedPlan(US, "weighted: one candidate")


def test_pick_stays_in_range_for_every_draw() -> None:
    plan = plan_for(EU + US + AP, (("eu", 1), ("us", 1), ("ap", 1000)))
    rng = random.Random(9)
    assert {plan.pick(0, False, rng, 0) for _ in range(20_000)} == {0, 1, 2}


def test_explain_lists_weights_and_shares() -> None:
    plan = plan_for(EU + US, (("eu", 70), ("us", 30)))
    assert plan.location_dependent is False
    assert plan.explain(0, False) == [
        "weighted: one site drawn per query by weight: eu 70 (70.0%), us 30 (30.0%)"
    ]
