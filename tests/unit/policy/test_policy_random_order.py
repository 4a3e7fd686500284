"""random: every candidate answers, in an order drawn per query."""

from __future__ import annotations

import random
from collections import Counter

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, NoLocator, PolicyEnv
from gslbd.policy.random_order import RandomOrder, ShufflePlan
from gslbd.types import EndpointKind, PolicyName


def endpoints(count: int) -> tuple[Endpoint, ...]:
    return tuple(
        Endpoint("app.gslb.example.com.", f"192.0.2.{i}", EndpointKind.IPV4, "eu")
        for i in range(1, count + 1)
    )


def service(max_answers: int = 8) -> Service:
    return Service(
        "app.gslb.example.com.", "gslb.example.com.", "app", PolicyName.RANDOM, max_answers=max_answers
    )


def env(seed: int = 7) -> PolicyEnv:
    return PolicyEnv(NoLocator(), {}, random.Random(seed))


def addresses(variant: tuple[Endpoint, ...]) -> tuple[str, ...]:
    return tuple(e.address for e in variant)


def test_three_candidates_give_every_order_once() -> None:
    plan = RandomOrder().plan(endpoints(3), service(), env())
    assert isinstance(plan, ShufflePlan)
    assert sorted(addresses(v) for v in plan.variants) == [
        ("192.0.2.1", "192.0.2.2", "192.0.2.3"),
        ("192.0.2.1", "192.0.2.3", "192.0.2.2"),
        ("192.0.2.2", "192.0.2.1", "192.0.2.3"),
        ("192.0.2.2", "192.0.2.3", "192.0.2.1"),
        ("192.0.2.3", "192.0.2.1", "192.0.2.2"),
        ("192.0.2.3", "192.0.2.2", "192.0.2.1"),
    ]
    assert plan.location_dependent is False


def test_max_answers_keeps_every_distinct_truncated_order() -> None:
    plan = RandomOrder().plan(endpoints(3), service(max_answers=1), env())
    assert sorted(addresses(v) for v in plan.variants) == [("192.0.2.1",), ("192.0.2.2",), ("192.0.2.3",)]


def test_each_candidate_leads_a_third_of_10000_queries() -> None:
    plan = RandomOrder().plan(endpoints(3), service(), env())
    rng = random.Random(42)
    firsts = Counter(plan.variants[plan.pick(0, False, rng, seq)][0].address for seq in range(10_000))
    for address in ("192.0.2.1", "192.0.2.2", "192.0.2.3"):
        assert abs(firsts[address] / 10_000 - 1 / 3) < 0.02


def test_seven_candidates_get_28_orders_each_leading_four_times() -> None:
    plan = RandomOrder().plan(endpoints(7), service(), env())
    assert len(plan.variants) == 28
    leads = Counter(v[0].address for v in plan.variants)
    assert set(leads.values()) == {4}
    for variant in plan.variants:
        assert sorted(addresses(variant)) == sorted(addresses(endpoints(7)))


def test_thirty_candidates_give_one_order_per_leader_cut_to_max_answers() -> None:
    plan = RandomOrder().plan(endpoints(30), service(max_answers=8), env())
    assert len(plan.variants) == 30
    assert [v[0].address for v in plan.variants] == [f"192.0.2.{i}" for i in range(1, 31)]
    for variant in plan.variants:
        assert len(variant) == 8
        assert len(set(variant)) == 8


def test_orders_come_from_the_plan_time_rng() -> None:
    first = RandomOrder().plan(endpoints(6), service(), env(seed=1))
    again = RandomOrder().plan(endpoints(6), service(), env(seed=1))
    other = RandomOrder().plan(endpoints(6), service(), env(seed=2))
    assert first.variants == again.variants
    assert first.variants != other.variants


def test_pick_ignores_the_client_and_the_counter() -> None:
    plan = RandomOrder().plan(endpoints(4), service(), env())
    a = [plan.pick(1, False, random.Random(5), seq) for seq in range(10)]
    b = [plan.pick(99, True, random.Random(5), 0) for _ in range(10)]
    assert a == b


def test_every_pick_is_a_valid_index() -> None:
    plan = RandomOrder().plan(endpoints(5), service(), env())
    rng = random.Random(3)
    assert {plan.pick(0, False, rng, 0) for _ in range(5_000)} == set(range(len(plan.variants)))


def test_one_candidate_is_a_fixed_answer() -> None:
    plan = RandomOrder().plan(endpoints(1), service(), env())
    assert plan == FixedPlan(endpoints(1), "random: one candidate")


def test_explain_says_how_many_orders() -> None:
    assert RandomOrder().plan(endpoints(3), service(), env()).explain(0, False) == [
        "random: 6 orders (every possible one), each query draws one uniformly"
    ]
