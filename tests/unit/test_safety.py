"""The safety check (answer/safety.py): which rules an admin change or a reload would break, with the
exact text of the refusal."""

from __future__ import annotations

from gslbd.answer.safety import Shortfall, admin_change, broken_rules, config_change, shortfalls
from gslbd.model.config import SafetyRule
from gslbd.model.service import Endpoint, Service
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState, EndpointKind

APP = "app.gslb.example.com."
API = "api.gslb.example.com."
NO_PEERS: frozenset[str] = frozenset()
SITES = SafetyRule(0, "*", min_sites_up=2)
ENDPOINTS = SafetyRule(1, "*", min_endpoints_up=1)
RULES = (SITES, ENDPOINTS)


def service(name: str, *where: tuple[str, str]) -> Service:
    eps = tuple(Endpoint(name, address, EndpointKind.IPV4, site) for address, site in where)
    return Service(name=name, zone="gslb.example.com.", label=name.partition(".")[0], endpoints=eps)


APP_SVC = service(APP, ("192.0.2.1", "eu"), ("192.0.2.2", "eu"), ("192.0.2.3", "us"))
API_SVC = service(API, ("192.0.2.9", "eu"))
SERVICES = {APP: APP_SVC, API: API_SVC}


def test_taking_down_one_of_two_endpoints_at_a_site_breaks_nothing() -> None:
    assert admin_change(RULES, SERVICES, Snapshot(), {(APP, "192.0.2.1"): AdminState.DOWN}, NO_PEERS) == []


def test_taking_down_the_last_endpoint_of_a_site_breaks_min_sites_up_with_the_rule_named() -> None:
    before = Snapshot(health={(APP, "192.0.2.2"): False})
    broken = admin_change(RULES, SERVICES, before, {(APP, "192.0.2.1"): AdminState.DOWN}, NO_PEERS)
    assert [b.rule.name for b in broken] == ["safety[0]"]
    assert broken[0].services == (APP,)
    assert broken[0].message() == (
        'safety[0] (min_sites_up: 2, services: "*") would be broken: '
        "app.gslb.example.com. would have 1 site up (2 now)"
    )


def test_taking_down_the_only_endpoint_breaks_both_rules() -> None:
    broken = admin_change(RULES, SERVICES, Snapshot(), {(API, "192.0.2.9"): AdminState.DOWN}, NO_PEERS)
    # api has one site only: min_sites_up was already short (1 < 2) and gets worse (0).
    assert [b.message() for b in broken] == [
        'safety[0] (min_sites_up: 2, services: "*") would be broken: '
        "api.gslb.example.com. would have 0 sites up (1 now)",
        'safety[1] (min_endpoints_up: 1, services: "*") would be broken: '
        "api.gslb.example.com. would have 0 endpoints up (1 now)",
    ]


def test_a_rule_already_broken_does_not_block_a_change_that_does_not_make_it_worse() -> None:
    # us is down by health: app has 1 site up, below min_sites_up 2 already.
    before = Snapshot(health={(APP, "192.0.2.3"): False})
    # Taking one of the two eu endpoints down leaves 1 site: not worse.
    assert admin_change(RULES, SERVICES, before, {(APP, "192.0.2.1"): AdminState.DOWN}, NO_PEERS) == []
    # Forcing us back up repairs it: never refused.
    assert admin_change(RULES, SERVICES, before, {(APP, "192.0.2.3"): AdminState.UP}, NO_PEERS) == []


def test_a_rule_covers_only_the_services_its_glob_matches() -> None:
    rules = (SafetyRule(0, "app.*", min_endpoints_up=1),)
    assert admin_change(rules, SERVICES, Snapshot(), {(API, "192.0.2.9"): AdminState.DOWN}, NO_PEERS) == []


def test_admin_up_or_obey_never_lowers_the_counts() -> None:
    before = Snapshot(admin={(API, "192.0.2.9"): AdminState.DOWN})
    for state in (AdminState.UP, AdminState.OBEY):
        assert admin_change(RULES, SERVICES, before, {(API, "192.0.2.9"): state}, NO_PEERS) == []


def test_obey_that_exposes_a_down_verdict_is_a_change_that_can_break() -> None:
    before = Snapshot(health={(API, "192.0.2.9"): False}, admin={(API, "192.0.2.9"): AdminState.UP})
    broken = admin_change(RULES, SERVICES, before, {(API, "192.0.2.9"): AdminState.OBEY}, NO_PEERS)
    assert [b.rule.name for b in broken] == ["safety[0]", "safety[1]"]


def test_no_rules_or_no_overrides_break_nothing() -> None:
    assert admin_change((), SERVICES, Snapshot(), {(API, "192.0.2.9"): AdminState.DOWN}, NO_PEERS) == []
    assert admin_change(RULES, SERVICES, Snapshot(), {}, NO_PEERS) == []


def test_shortfalls_report_what_health_broke_now() -> None:
    health = Snapshot(health={(APP, "192.0.2.3"): False})
    assert shortfalls(SITES, APP_SVC, health, NO_PEERS) == [Shortfall(APP, "min_sites_up", 1, 1)]
    assert shortfalls(ENDPOINTS, APP_SVC, health, NO_PEERS) == []


def test_a_reload_that_drops_a_site_breaks_min_sites_up() -> None:
    new = service(APP, ("192.0.2.1", "eu"), ("192.0.2.2", "eu"))
    broken = config_change(RULES, SERVICES, [new, API_SVC], Snapshot(), NO_PEERS, NO_PEERS)
    assert [b.message() for b in broken] == [
        'safety[0] (min_sites_up: 2, services: "*") would be broken: '
        "app.gslb.example.com. would have 1 site up (2 now)"
    ]


def test_a_reload_that_adds_or_removes_services_or_keeps_counts_breaks_nothing() -> None:
    new_service = service("new.gslb.example.com.", ("192.0.2.7", "eu"))  # 1 site, but new: not worse
    assert config_change(RULES, SERVICES, [APP_SVC, new_service], Snapshot(), NO_PEERS, NO_PEERS) == []


def test_a_refusal_names_at_most_five_services_then_how_many_more() -> None:
    names = [f"s{i}.gslb.example.com." for i in range(7)]
    old = {n: service(n, ("192.0.2.1", "eu")) for n in names}
    new = [service(n) for n in names]
    broken = config_change((ENDPOINTS,), old, new, Snapshot(), NO_PEERS, NO_PEERS)
    assert broken[0].message().endswith("s4.gslb.example.com. would have 0 endpoints up (1 now); and 2 more")
    assert len(broken[0].services) == 7


def test_broken_rules_lists_the_rules_a_service_lacks_now() -> None:
    us_down = Snapshot(health={(APP, "192.0.2.3"): False})
    assert broken_rules(RULES, APP_SVC, us_down, NO_PEERS) == [SITES]
    assert broken_rules(RULES, APP_SVC, Snapshot(), NO_PEERS) == []
    all_down = Snapshot(admin={(API, "192.0.2.9"): AdminState.DOWN})
    assert broken_rules(RULES, API_SVC, all_down, NO_PEERS) == [SITES, ENDPOINTS]
