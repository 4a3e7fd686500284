"""hash: a client subnet keeps its endpoint; losing one of N endpoints moves only its clients."""

from __future__ import annotations

import ipaddress
import random
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, NoLocator, Plan, PolicyEnv
from gslbd.policy.rendezvous import (
    Rendezvous,
    RendezvousPlan,
    WeightedRendezvousPlan,
    best_index,
    best_weighted_index,
    endpoint_id,
    mix64,
    subnet_key,
)
from gslbd.types import EndpointKind, PolicyName

NAME = "app.gslb.example.com."
FIVE = tuple(Endpoint(NAME, f"192.0.2.{i}", EndpointKind.IPV4, "eu") for i in range(1, 6))
SUBNETS = [(i << 8) + 7 for i in range(10_000)]  # 10,000 distinct /24s, host .7 in each


def plan_for(candidates: tuple[Endpoint, ...]) -> Plan:
    service = Service(NAME, "gslb.example.com.", "app", PolicyName.HASH)
    return Rendezvous().plan(candidates, service, PolicyEnv(NoLocator(), {}, random.Random(1)))


def chosen(plan: Plan, ip: int, v6: bool = False) -> str:
    return plan.variants[plan.pick(ip, v6, random.Random(0), 0)][0].address


def assignment(candidates: tuple[Endpoint, ...]) -> list[str]:
    plan = plan_for(candidates)
    return [chosen(plan, ip) for ip in SUBNETS]


def test_each_variant_is_one_endpoint_and_the_plan_depends_on_the_client() -> None:
    plan = plan_for(FIVE)
    assert isinstance(plan, RendezvousPlan)
    assert plan.variants == tuple((e,) for e in FIVE)
    assert plan.location_dependent is True


def test_a_client_keeps_its_endpoint_across_queries_and_plan_rebuilds() -> None:
    ip = int(ipaddress.ip_address("198.18.7.20"))
    first = chosen(plan_for(FIVE), ip)
    plan = plan_for(FIVE)
    assert {chosen(plan, ip) for _ in range(20)} == {first}
    assert chosen(plan_for(FIVE), ip) == first


def test_the_whole_slash_24_shares_one_endpoint() -> None:
    plan = plan_for(FIVE)
    base = int(ipaddress.ip_address("198.18.7.0"))
    assert len({chosen(plan, base + host) for host in range(256)}) == 1


def test_the_whole_slash_56_shares_one_endpoint() -> None:
    plan = plan_for(FIVE)
    base = int(ipaddress.ip_address("2001:db8:0:1200::"))
    hosts = [base + (1 << 64) * k + k for k in range(0, 256, 17)]
    assert len({chosen(plan, ip, True) for ip in hosts}) == 1
    assert subnet_key(base, True) != subnet_key(base >> 96, False)


def test_subnets_spread_evenly_over_five_endpoints() -> None:
    counts = Counter(assignment(FIVE))
    for endpoint in FIVE:
        assert abs(counts[endpoint.address] / 10_000 - 0.2) < 0.02


def test_losing_one_of_five_moves_only_its_clients() -> None:
    before = assignment(FIVE)
    after = assignment(FIVE[:2] + FIVE[3:])
    moved = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert all(before[i] == "192.0.2.3" for i in moved)
    assert len(moved) == before.count("192.0.2.3")
    assert abs(len(moved) / 10_000 - 0.2) < 0.02
    assert Counter(after[i] for i in moved).keys() == {"192.0.2.1", "192.0.2.2", "192.0.2.4", "192.0.2.5"}


def test_a_returning_endpoint_takes_back_exactly_its_clients() -> None:
    before = assignment(FIVE)
    without = assignment(FIVE[1:])
    again = assignment(FIVE)
    assert again == before
    assert sum(a != b for a, b in zip(before, without, strict=True)) == before.count("192.0.2.1")


def test_candidate_order_does_not_change_the_choice() -> None:
    assert assignment(FIVE) == assignment(tuple(reversed(FIVE)))


def test_scores_are_stable_across_processes() -> None:
    # Fixed values: blake2b ids and splitmix64 do not depend on PYTHONHASHSEED or the platform.
    assert mix64(0) == 0xE220A8397B1DCDAF
    assert endpoint_id(FIVE[0]) == endpoint_id(Endpoint("other.", "192.0.2.1", EndpointKind.IPV4, "us"))
    ids = tuple(endpoint_id(e) for e in FIVE)
    assert [best_index(subnet_key(ip << 8, False), ids) for ip in range(8)] == GOLDEN


GOLDEN = [2, 3, 1, 0, 4, 1, 3, 3]


def test_subnet_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from gslbd.policy import rendezvous

    monkeypatch.setattr(rendezvous, "CACHE_LIMIT", 5)
    plan = plan_for(FIVE)
    assert isinstance(plan, RendezvousPlan)
    for ip in SUBNETS[:50]:
        chosen(plan, ip)
    assert len(plan.cache) <= 5
    assert [chosen(plan, ip) for ip in SUBNETS[:50]] == assignment(FIVE)[:50]


def test_one_candidate_is_fixed() -> None:
    assert plan_for(FIVE[:1]) == FixedPlan(FIVE[:1], "hash: one candidate")


def test_explain_names_the_subnet_and_the_winner() -> None:
    plan = plan_for(FIVE)
    ip = int(ipaddress.ip_address("198.18.7.20"))
    assert plan.explain(ip, False) == [
        "hash: client subnet 198.18.7.0/24 scored against 5 candidates (rendezvous hashing); "
        f"the highest score is {chosen(plan, ip)}"
    ]


# Weighted rendezvous: endpoint `weight` sets the share of client subnets.

WEIGHTS = st.lists(st.integers(1, 20), min_size=2, max_size=6)
PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None)
SHARE_TOLERANCE = 0.02  # over 10,000 subnets one share's standard deviation is at most 0.005


def weighted(weights: list[int], offset: int = 1) -> tuple[Endpoint, ...]:
    return tuple(
        replace(Endpoint(NAME, f"192.0.2.{offset + i}", EndpointKind.IPV4, "eu"), weight=w)
        for i, w in enumerate(weights)
    )


def moved_between(before: list[str], after: list[str]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]


@PROPERTY
@given(weights=WEIGHTS)
def test_shares_of_client_subnets_converge_to_weight_over_sum(weights: list[int]) -> None:
    endpoints = weighted(weights)
    counts = Counter(assignment(endpoints))
    for endpoint, w in zip(endpoints, weights, strict=True):
        assert abs(counts[endpoint.address] / len(SUBNETS) - w / sum(weights)) < SHARE_TOLERANCE


@PROPERTY
@given(weights=WEIGHTS, data=st.data())
def test_removing_one_endpoint_moves_only_the_clients_that_were_on_it(
    weights: list[int], data: st.DataObject
) -> None:
    endpoints = weighted(weights)
    gone = data.draw(st.integers(0, len(endpoints) - 1))
    before = assignment(endpoints)
    after = assignment(endpoints[:gone] + endpoints[gone + 1 :])
    moved = moved_between(before, after)
    assert all(before[i] == endpoints[gone].address for i in moved)
    assert len(moved) == before.count(endpoints[gone].address)


@PROPERTY
@given(count=st.integers(2, 8), weight=st.integers(1, 20), data=st.data())
def test_removing_one_of_n_equal_endpoints_moves_about_one_nth_of_clients(
    count: int, weight: int, data: st.DataObject
) -> None:
    endpoints = weighted([weight] * count)
    gone = data.draw(st.integers(0, count - 1))
    moved = moved_between(assignment(endpoints), assignment(endpoints[:gone] + endpoints[gone + 1 :]))
    assert len(moved) / len(SUBNETS) < 1 / count + SHARE_TOLERANCE


@PROPERTY
@given(weights=WEIGHTS, added=st.integers(1, 20))
def test_adding_an_endpoint_moves_clients_only_to_it(weights: list[int], added: int) -> None:
    endpoints = weighted(weights)
    newcomer = weighted([added], offset=100)
    before = assignment(endpoints)
    after = assignment(endpoints + newcomer)
    moved = moved_between(before, after)
    assert all(after[i] == newcomer[0].address for i in moved)
    assert len(moved) == after.count(newcomer[0].address)
    assert abs(len(moved) / len(SUBNETS) - added / (sum(weights) + added)) < SHARE_TOLERANCE


def test_equal_weights_keep_todays_integer_plan_and_assignment() -> None:
    doubled = tuple(replace(e, weight=7) for e in FIVE)
    plan = plan_for(doubled)
    assert isinstance(plan, RendezvousPlan)
    assert assignment(doubled) == assignment(FIVE)


def test_the_weighted_score_ranks_equal_weights_as_the_integer_hash_does() -> None:
    ids = tuple(endpoint_id(e) for e in FIVE)
    for ip in SUBNETS[:2000]:
        key = subnet_key(ip, False)
        assert best_weighted_index(key, ids, (3,) * 5) == best_index(key, ids)


def test_unequal_weights_make_a_weighted_plan_with_one_variant_per_endpoint() -> None:
    endpoints = weighted([1, 2, 3])
    plan = plan_for(endpoints)
    assert isinstance(plan, WeightedRendezvousPlan)
    assert plan.variants == tuple((e,) for e in endpoints)
    assert plan.weights == (1, 2, 3)
    assert plan.location_dependent is True


def test_weight_zero_is_never_chosen_while_a_positive_weight_exists() -> None:
    endpoints = weighted([2, 0, 1, 0])
    plan = plan_for(endpoints)
    assert isinstance(plan, WeightedRendezvousPlan)
    assert {e.address for (e,) in plan.variants} == {"192.0.2.1", "192.0.2.3"}
    assert set(assignment(endpoints)) == {"192.0.2.1", "192.0.2.3"}
    assert plan.explain(SUBNETS[0], False)[0] == (
        "hash: weight 0, left out while a positive weight exists: 192.0.2.2, 192.0.2.4"
    )


def test_one_positive_weight_answers_alone() -> None:
    assert plan_for(weighted([0, 4, 0])) == FixedPlan(
        weighted([0, 4, 0])[1:2], "hash: only 192.0.2.2 has a positive weight"
    )


def test_all_weights_zero_count_as_equal() -> None:
    endpoints = weighted([0, 0, 0])
    plan = plan_for(endpoints)
    assert isinstance(plan, RendezvousPlan)
    assert assignment(endpoints) == assignment(weighted([1, 1, 1]))
    assert plan.explain(SUBNETS[0], False)[0] == "hash: every candidate has weight 0, so all count as equal"


def test_weighted_scores_are_stable_across_processes() -> None:
    ids = tuple(endpoint_id(e) for e in FIVE)
    weights = (1, 2, 3, 4, 5)
    assert [best_weighted_index(subnet_key(ip << 8, False), ids, weights) for ip in range(8)] == WGOLDEN


WGOLDEN = [2, 3, 1, 1, 4, 4, 3, 3]


def test_weighted_explain_lists_weights_shares_scores_and_the_winner() -> None:
    plan = plan_for(weighted([1, 3]))
    ip = int(ipaddress.ip_address("198.18.7.20"))
    (line,) = plan.explain(ip, False)
    assert line.startswith(
        "hash: client subnet 198.18.7.0/24 scored against 2 candidates "
        "(weighted rendezvous hashing, score -weight/ln(h)): 192.0.2.1 weight 1 (25.0%) score "
    )
    assert ", 192.0.2.2 weight 3 (75.0%) score " in line
    assert line.endswith(f"; the highest score is {chosen(plan, ip)}")


def test_the_c_table_computes_equal_and_unequal_weights() -> None:
    from gslbd.wire import ctable as ct

    def kind(plan: Plan) -> int:
        entry: Any = SimpleNamespace(variants=(), pick=plan.pick, location_dependent=True)
        found: int = ct._entry_spec(entry, 0, ct._Locators())[0]
        return found

    assert kind(plan_for(weighted([2, 2, 2]))) == ct.K_HASH
    assert kind(plan_for(weighted([1, 2, 2]))) == ct.K_WHASH
