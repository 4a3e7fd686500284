"""pools and rules: the first matching rule's pool answers, fallback chains while a pool is short."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace

from gslbd.model.service import Endpoint, Pool, Rule, Service
from gslbd.model.topology import Locality, NetworkEntry, SiteInfo, Topology
from gslbd.policy import plan_service
from gslbd.policy.base import Location, Plan, PolicyEnv
from gslbd.policy.locate import TopologyLocator
from gslbd.policy.pools import PoolPlan, resolve_chain, rule_matches
from gslbd.types import EndpointKind, PolicyName

NAME = "app.gslb.example.com."
SITES = {"eu": SiteInfo("eu", Locality("europe")), "us": SiteInfo("us"), "ap": SiteInfo("ap")}
NETWORKS = (
    NetworkEntry(ipaddress.ip_network("10.1.0.0/16"), "eu"),
    NetworkEntry(ipaddress.ip_network("10.2.0.0/16"), "us"),
    NetworkEntry(ipaddress.ip_network("10.3.0.0/16"), "ap"),
)


def ep(address: str, site: str) -> Endpoint:
    return Endpoint(NAME, address, EndpointKind.IPV4, site)


EU1, EU2, US1, AP1 = (
    ep("192.0.2.1", "eu"),
    ep("192.0.2.2", "eu"),
    ep("198.51.100.1", "us"),
    ep("203.0.113.1", "ap"),
)
ALL = (EU1, EU2, US1, AP1)
POOLS = (
    Pool("europe", sites=("eu",), fallback="america", min_healthy=2),
    Pool("america", sites=("us",), fallback="asia"),
    Pool("asia", addresses=("203.0.113.1",)),
)
RULES = (
    Rule("europe", sites=("eu",)),
    Rule("asia", networks=(ipaddress.ip_network("172.16.0.0/12"),)),
    Rule("america"),
)


def plan_for(candidates: tuple[Endpoint, ...], rules: tuple[Rule, ...] = RULES, **changes: object) -> Plan:
    service = replace(Service(NAME, "gslb.example.com.", "app", pools=POOLS, rules=rules), **changes)
    env = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
    return plan_service(candidates, service, env)


def members(plan: Plan, client: str) -> set[str]:
    ip = int(ipaddress.ip_address(client))
    return {e.address for seq in range(8) for e in plan.variants[plan.pick(ip, False, random.Random(0), seq)]}


def test_the_first_matching_rule_picks_the_pool() -> None:
    plan = plan_for(ALL)
    assert members(plan, "10.1.0.1") == {"192.0.2.1", "192.0.2.2"}  # site eu -> europe
    assert members(plan, "172.16.5.5") == {"203.0.113.1"}  # the network rule -> asia
    assert members(plan, "10.2.0.1") == {"198.51.100.1"}  # the catch-all -> america
    assert members(plan, "8.8.8.8") == {"198.51.100.1"}


def test_a_pool_below_its_min_healthy_falls_back_down_the_chain() -> None:
    plan = plan_for((EU1, US1, AP1))  # europe needs 2 up: one is not enough
    assert members(plan, "10.1.0.1") == {"198.51.100.1"}
    chained = plan_for((EU1, AP1))  # europe -> america (none) -> asia
    assert members(chained, "10.1.0.1") == {"203.0.113.1"}


def test_when_no_pool_of_the_chain_has_enough_every_candidate_answers() -> None:
    plan = plan_for((EU1, EU2, US1), rules=(Rule("asia", sites=("eu",)), Rule("europe")))
    assert members(plan, "10.1.0.1") == {"192.0.2.1", "192.0.2.2", "198.51.100.1"}


def test_the_services_policy_chooses_inside_the_pool() -> None:
    plan = plan_for(ALL, policy=PolicyName.FAILOVER, failover_order=("us", "eu"))
    wide = (Pool("world", sites=("eu", "us")), *POOLS[1:])
    service = Service(NAME, "gslb.example.com.", "app", PolicyName.FAILOVER, failover_order=("us", "eu"))
    env = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
    world = plan_service(
        ALL, replace(service, pools=wide, rules=(Rule("asia", sites=("ap",)), Rule("world"))), env
    )
    assert members(world, "10.1.0.1") == {"198.51.100.1"}  # failover inside world: us first
    assert members(plan, "10.1.0.1") == {"192.0.2.1", "192.0.2.2"}


def test_rules_that_all_reach_one_pool_make_the_pools_plan_alone() -> None:
    plan = plan_for((US1, AP1), rules=(Rule("america", sites=("eu",)), Rule("america")))
    assert not isinstance(plan, PoolPlan)
    assert not plan.location_dependent


def test_conditions_of_one_rule_must_all_match() -> None:
    rule = Rule("x", sites=("eu",), countries=("DE",))
    assert rule_matches(rule, Location(site="eu", country="DE"), None, False)
    assert not rule_matches(rule, Location(site="eu", country="FR"), None, False)
    assert not rule_matches(rule, Location(country="DE"), None, False)
    assert rule_matches(
        Rule("x", continents=("EU",), asns=(64500,)), Location(continent="EU", asn=64500), 1, False
    )
    v6 = Rule("x", networks=(ipaddress.ip_network("2001:db8::/32"),))
    assert rule_matches(v6, Location(), int(ipaddress.ip_address("2001:db8::1")), True)
    assert not rule_matches(v6, Location(), int(ipaddress.ip_address("10.0.0.1")), False)


def test_resolve_chain_says_why_each_pool_was_passed_over() -> None:
    pools = {p.name: p for p in POOLS}
    assert resolve_chain(pools, "europe", (EU1, AP1)) == (
        "asia",
        (AP1,),
        ("pool europe has 1 of min_healthy 2 up", "pool america has 0 of min_healthy 1 up"),
    )


def test_explain_names_the_rule_the_pool_and_the_fallbacks() -> None:
    plan = plan_for((EU1, US1, AP1))
    assert isinstance(plan, PoolPlan)
    lines = plan.explain(int(ipaddress.ip_address("10.1.0.1")), False)
    assert lines[:3] == [
        "pools: rule 1 (the first rule the client matches) -> pool europe",
        "pools: pool europe has 1 of min_healthy 2 up: its fallback is taken",
        "pools: pool america answers",
    ]


def test_rules_decided_by_location_alone_are_marked_for_the_c_table() -> None:
    assert isinstance(
        by_site := plan_for(ALL, rules=(Rule("europe", sites=("eu",)), Rule("america"))), PoolPlan
    )
    assert by_site.by_location
    assert isinstance(by_net := plan_for(ALL), PoolPlan)
    assert not by_net.by_location  # a networks rule needs the address
