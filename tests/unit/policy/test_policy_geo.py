"""geo: same zone, else same region, else same site, else nearest site, else everything."""

from __future__ import annotations

import ipaddress
import random

import pytest

from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality, NetworkEntry, SiteInfo, Topology
from gslbd.policy.base import FixedPlan, Plan, PolicyEnv
from gslbd.policy.geo import Geo, GeoPlan, great_circle_km
from gslbd.policy.locate import TopologyLocator
from gslbd.policy.round_robin import RotationPlan
from gslbd.types import EndpointKind, PolicyName

NAME = "app.gslb.example.com."
SITES = {
    "eu": SiteInfo("eu", Locality("europe-west3"), (50.1, 8.7)),
    "eu2": SiteInfo("eu2", Locality("europe-west1"), (50.4, 3.8)),
    "us": SiteInfo("us", Locality("us-east4"), (39.0, -77.5)),
    "ap": SiteInfo("ap", Locality("asia-southeast1"), (1.35, 103.8)),
    "lab": SiteInfo("lab"),
    "home": SiteInfo("home", Locality("sa-east1"), (-23.5, -46.6)),
}


def ep(address: str, site: str, region: str | None = None, zone: str | None = None) -> Endpoint:
    return Endpoint(NAME, address, EndpointKind.IPV4, site, Locality(region, zone))


EU_A = ep("192.0.2.1", "eu", "europe-west3", "europe-west3-a")
EU_B = ep("192.0.2.2", "eu", "europe-west3", "europe-west3-b")
EU2 = ep("192.0.2.3", "eu2", "europe-west1", "europe-west1-b")
US = ep("198.51.100.1", "us", "us-east4")
AP = ep("203.0.113.1", "ap")  # no locality of its own: the site's
ALL = (EU_A, EU_B, EU2, US, AP)

NETWORKS = (
    NetworkEntry(ipaddress.ip_network("10.1.0.0/16"), "eu", Locality("europe-west3", "europe-west3-a")),
    NetworkEntry(ipaddress.ip_network("10.2.0.0/16"), None, Locality("europe-west3", "europe-west3-c")),
    NetworkEntry(ipaddress.ip_network("10.3.0.0/16"), None, Locality("asia-southeast1")),
    NetworkEntry(ipaddress.ip_network("10.4.0.0/16"), "us"),
    NetworkEntry(ipaddress.ip_network("10.5.0.0/16"), "home"),
    NetworkEntry(ipaddress.ip_network("10.6.0.0/16"), "lab"),
    NetworkEntry(ipaddress.ip_network("2001:db8:e::/48"), "eu2"),
)


def env() -> PolicyEnv:
    return PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))


def plan_for(
    candidates: tuple[Endpoint, ...], max_answers: int = 8, bias: tuple[tuple[str, int], ...] = ()
) -> Plan:
    service = Service(NAME, "gslb.example.com.", "app", PolicyName.GEO, max_answers=max_answers, bias=bias)
    return Geo().plan(candidates, service, env())


def answer(plan: Plan, client: str, seq: int = 0) -> list[str]:
    addr = ipaddress.ip_address(client)
    index = plan.pick(int(addr), addr.version == 6, random.Random(0), seq)
    return [e.address for e in plan.variants[index]]


def members(plan: Plan, client: str) -> set[str]:
    """Every address the client can get over a full rotation."""
    return {a for seq in range(len(ALL)) for a in answer(plan, client, seq)}


def test_same_zone_is_preferred() -> None:
    assert members(plan_for(ALL), "10.1.9.9") == {"192.0.2.1"}


def test_same_region_when_no_candidate_is_in_the_zone() -> None:
    assert members(plan_for(ALL), "10.2.9.9") == {"192.0.2.1", "192.0.2.2"}


def test_region_matches_the_sites_locality_of_an_endpoint_without_one() -> None:
    assert members(plan_for(ALL), "10.3.0.1") == {"203.0.113.1"}


def test_same_site_when_the_region_has_no_candidates() -> None:
    candidates = (ep("192.0.2.7", "us", "us-west1"), EU_A)
    assert members(plan_for(candidates), "10.4.0.1") == {"192.0.2.7"}


def test_nearest_site_by_the_client_sites_coordinates() -> None:
    assert members(plan_for(ALL), "10.5.0.1") == {"198.51.100.1"}  # Sao Paulo -> Ashburn
    without_us = plan_for((EU_A, EU2, AP))
    assert members(without_us, "10.4.0.1") == {"192.0.2.3"}  # Ashburn -> Belgium, not Frankfurt


def test_same_region_follows_health() -> None:
    assert members(plan_for((EU_B, US)), "10.1.0.1") == {"192.0.2.2"}
    assert members(plan_for((EU2, US)), "10.1.0.1") == {"192.0.2.3"}  # nearest from the eu site


def test_unknown_client_gets_every_candidate() -> None:
    plan = plan_for(ALL)
    assert members(plan, "172.16.0.1") == {e.address for e in ALL}
    assert len(answer(plan, "172.16.0.1")) == 5


def test_client_site_without_coordinates_gets_everything() -> None:
    assert members(plan_for(ALL), "10.6.0.1") == {e.address for e in ALL}


def test_ipv6_clients_are_located_too() -> None:
    assert members(plan_for(ALL), "2001:db8:e::53") == {"192.0.2.3"}


def test_the_chosen_set_rotates_per_query() -> None:
    plan = plan_for(ALL, max_answers=2)
    assert [answer(plan, "10.2.0.1", seq) for seq in range(3)] == [
        ["192.0.2.1", "192.0.2.2"],
        ["192.0.2.2", "192.0.2.1"],
        ["192.0.2.1", "192.0.2.2"],
    ]


def test_plan_depends_on_location_and_caches_clients() -> None:
    plan = plan_for(ALL)
    assert isinstance(plan, GeoPlan)
    assert plan.location_dependent is True
    answer(plan, "10.1.0.1")
    answer(plan, "10.1.0.1")
    answer(plan, "2001:db8:e::1")
    assert len(plan.cache4) == 1
    assert len(plan.cache6) == 1


def test_client_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from gslbd.policy import geo

    monkeypatch.setattr(geo, "CACHE_LIMIT", 3)
    plan = plan_for(ALL)
    assert isinstance(plan, GeoPlan)
    for i in range(10):
        assert answer(plan, f"10.1.0.{i}") == ["192.0.2.1"]
    assert len(plan.cache4) <= 3


def test_candidates_all_in_one_place_do_not_depend_on_the_client() -> None:
    plan = plan_for((EU_A, ep("192.0.2.9", "eu", "europe-west3", "europe-west3-a")))
    assert isinstance(plan, RotationPlan)
    assert plan.location_dependent is False
    assert answer(plan, "10.4.0.1", 1) == ["192.0.2.9", "192.0.2.1"]


def test_one_candidate_is_fixed() -> None:
    assert plan_for((US,)) == FixedPlan((US,), "geo: one candidate")


def test_explain_says_which_rule_chose() -> None:
    plan = plan_for(ALL)
    ip = int(ipaddress.ip_address("10.2.0.1"))
    assert plan.explain(ip, False) == [
        "geo: same region europe-west3 as the client -> 192.0.2.1, 192.0.2.2",
        "geo: rotates among 2 answer(s) per query",
    ]
    unknown = int(ipaddress.ip_address("172.16.0.1"))
    assert plan.explain(unknown, False)[0] == (
        "geo: client location unknown: all candidates -> "
        "192.0.2.1, 192.0.2.2, 192.0.2.3, 198.51.100.1, 203.0.113.1"
    )
    home = int(ipaddress.ip_address("10.5.0.1"))
    assert plan.explain(home, False)[0] == (
        "geo: nearest site us (7657 km from the client's site home) -> 198.51.100.1"
    )


# From Sao Paulo (the client site home): us 7657 km, eu2 9591 km, eu 9823 km, ap 15985 km.
def test_a_positive_bias_grows_a_sites_area_in_the_distance_choice() -> None:
    assert members(plan_for(ALL, bias=(("eu2", 30),)), "10.5.0.1") == {"192.0.2.3"}  # 9591 * 0.7 = 6714


def test_a_negative_bias_shrinks_a_sites_area() -> None:
    assert members(plan_for(ALL, bias=(("us", -30),)), "10.5.0.1") == {"192.0.2.3"}  # 7657 * 1.3 = 9954


def test_a_bias_too_small_to_move_the_border_changes_nothing() -> None:
    assert members(plan_for(ALL, bias=(("eu2", 10),)), "10.5.0.1") == {"198.51.100.1"}  # 8632 > 7657


def test_bias_applies_only_to_the_distance_choice_not_to_zone_region_or_site() -> None:
    biased = plan_for(ALL, bias=(("ap", 99), ("us", 99)))
    assert members(biased, "10.1.9.9") == {"192.0.2.1"}  # same zone still wins
    assert members(biased, "10.4.0.1") == {"198.51.100.1"}  # same site still wins


def test_explain_gives_the_distances_and_the_bias() -> None:
    plan = plan_for(ALL, bias=(("eu2", 30),))
    assert isinstance(plan, GeoPlan)
    home = int(ipaddress.ip_address("10.5.0.1"))
    assert plan.explain(home, False)[0] == (
        "geo: nearest site eu2 with bias (9591 km from the client's site home, bias +30;"
        " biased km: eu 9823, eu2 6714, us 7657, ap 15985) -> 192.0.2.3"
    )


def test_a_change_of_bias_makes_a_different_plan() -> None:
    assert plan_for(ALL, bias=(("eu2", 30),)) != plan_for(ALL)


def test_great_circle_distance_paris_to_london() -> None:
    assert round(great_circle_km((48.8566, 2.3522), (51.5074, -0.1278))) == 344
    assert great_circle_km((10.0, 20.0), (10.0, 20.0)) == 0.0
