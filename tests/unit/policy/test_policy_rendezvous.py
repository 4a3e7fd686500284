"""hash: a client subnet keeps its endpoint; losing one of N endpoints moves only its clients."""

from __future__ import annotations

import ipaddress
import random
from collections import Counter

import pytest

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, NoLocator, Plan, PolicyEnv
from gslbd.policy.rendezvous import Rendezvous, RendezvousPlan, best_index, endpoint_id, mix64, subnet_key
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
