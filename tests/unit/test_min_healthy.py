"""services[].min_healthy: a site whose up endpoints of the asked family fall below it counts as failed
(failover moves on, the other sites answer); when every site is below it every healthy candidate is
answered; `gslbd explain` says which sites were below and why."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from gslbd.answer import Dynamic, View, build_view
from gslbd.explain import explain
from gslbd.model.config import Config, PeersConfig, PeerSite, SiteConfig
from gslbd.model.service import Endpoint, MinHealthy, Service
from gslbd.model.zone import Nameserver, Soa, Zone
from gslbd.policy.locate import build_env
from gslbd.state.snapshot import Snapshot
from gslbd.types import EndpointKind, PolicyName

ORIGIN = "gslb.example.com."
APP = f"app.{ORIGIN}"
ZONE = Zone(
    ORIGIN,
    300,
    60,
    Soa("ns1.gslb.example.com.", "hostmaster.example.com.", 1),
    (Nameserver("ns1.gslb.example.com.", ("192.0.2.53",)),),
)
EU = ("192.0.2.1", "192.0.2.2", "192.0.2.3")
US = ("198.51.100.1", "198.51.100.2")
AP = ("203.0.113.1",)


def ep(address: str, site: str) -> Endpoint:
    kind = EndpointKind.IPV6 if ":" in address else EndpointKind.IPV4
    return Endpoint(APP, address, kind, site)


def app(
    min_healthy: MinHealthy | None, policy: PolicyName = PolicyName.FAILOVER, extra: tuple[Endpoint, ...] = ()
) -> Service:
    endpoints = tuple(ep(a, "eu") for a in EU) + tuple(ep(a, "us") for a in US) + extra
    return Service(
        APP, ORIGIN, "app", policy, failover_order=("eu", "us"), endpoints=endpoints, min_healthy=min_healthy
    )


def view_of(
    service: Service, down: tuple[str, ...] = (), learned: tuple[Endpoint, ...] = (), **changes: object
) -> View:
    config = replace(Config(site=SiteConfig("eu"), zones=(ZONE,), services=(service,)), **changes)
    health = {(APP, a): False for a in down}
    snapshot = Snapshot(1, health, peer_endpoints={APP: learned} if learned else {})
    return build_view(config, snapshot, build_env(config, random.Random(1)))


def answered(view: View, rtype: str = "A") -> list[str]:
    """Every address any answer of the outcome can give (sorted)."""
    outcome = view.get(APP).outcome(rtype)  # type: ignore[union-attr]
    assert isinstance(outcome, Dynamic)
    return sorted({e.address for variant in outcome.plan.variants for e in variant})


def reason(view: View, rtype: str = "A") -> str:
    outcome = view.get(APP).outcome(rtype)  # type: ignore[union-attr]
    assert isinstance(outcome, Dynamic)
    return outcome.reason


def test_failover_moves_to_the_next_site_when_the_preferred_one_falls_below_a_count() -> None:
    service = app(MinHealthy(count=2))
    assert answered(view_of(service, down=("192.0.2.1",))) == ["192.0.2.2", "192.0.2.3"]
    below = view_of(service, down=("192.0.2.1", "192.0.2.2"))
    assert answered(below) == list(US)
    assert reason(below) == (
        "3 of 5 candidates healthy; site eu below min_healthy 2: 1 of 3 up, needs 2; "
        "answered from the sites at or above it"
    )


def test_without_min_healthy_one_endpoint_keeps_the_preferred_site() -> None:
    assert answered(view_of(app(None), down=("192.0.2.1", "192.0.2.2"))) == ["192.0.2.3"]


@pytest.mark.parametrize(
    ("share", "up_in_eu", "eu_answers"),
    [(0.5, 2, True), (0.5, 1, False), (1.0, 3, True), (1.0, 2, False), (0.34, 1, False), (0.33, 1, True)],
)
def test_a_share_is_of_the_sites_endpoints_rounded_up(share: float, up_in_eu: int, eu_answers: bool) -> None:
    down = EU[up_in_eu:]
    got = answered(view_of(app(MinHealthy(share=share)), down=down))
    assert got == (sorted(EU[:up_in_eu]) if eu_answers else list(US))


def test_every_site_below_answers_every_healthy_candidate() -> None:
    down = ("192.0.2.1", "198.51.100.1")
    view = view_of(app(MinHealthy(share=1.0), PolicyName.ROUND_ROBIN), down=down)
    assert answered(view) == ["192.0.2.2", "192.0.2.3", "198.51.100.2"]
    # failover then prefers as without a threshold: the preferred site's remaining endpoints
    assert answered(view_of(app(MinHealthy(share=1.0)), down=down)) == ["192.0.2.2", "192.0.2.3"]
    assert reason(view) == (
        "3 of 5 candidates healthy; site eu below min_healthy 100%: 2 of 3 up, needs 3; "
        "site us below min_healthy 100%: 1 of 2 up, needs 2; every site is below it: every healthy "
        "candidate is answered"
    )


def test_a_site_without_up_endpoints_does_not_make_the_others_count_as_all_below() -> None:
    view = view_of(app(MinHealthy(count=2)), down=("192.0.2.1", "192.0.2.2", "192.0.2.3"))
    assert answered(view) == list(US)


def test_round_robin_leaves_out_the_sites_below() -> None:
    view = view_of(app(MinHealthy(count=2), PolicyName.ROUND_ROBIN), down=("198.51.100.1",))
    assert answered(view) == list(EU)


def test_the_threshold_is_per_address_family() -> None:
    six = (ep("2001:db8::1", "eu"), ep("2001:db8::2", "us"))
    view = view_of(app(MinHealthy(count=2), PolicyName.ROUND_ROBIN, six), down=("192.0.2.1", "192.0.2.2"))
    assert answered(view) == list(US)  # eu has 1 of 3 A endpoints up
    assert answered(view, "AAAA") == ["2001:db8::1", "2001:db8::2"]  # one of one: below 2 everywhere
    assert "every site is below it" in reason(view, "AAAA")


PEERS = PeersConfig(sites=(PeerSite("us"), PeerSite("ap")))


def test_a_peer_sites_configured_endpoints_are_its_total() -> None:
    learned = (ep("198.51.100.1", "us"),)  # us publishes only its up endpoints: 1 of the 2 configured
    service = app(MinHealthy(share=1.0), PolicyName.ROUND_ROBIN)
    view = view_of(service, down=("192.0.2.1",), learned=learned, peers=PEERS)
    assert answered(view) == ["192.0.2.2", "192.0.2.3", "198.51.100.1"]  # both below: every healthy one
    assert "site us below min_healthy 100%: 1 of 2 up, needs 2" in reason(view)


def test_a_peer_site_without_configured_endpoints_counts_what_it_publishes() -> None:
    learned = (ep("203.0.113.1", "ap"),)
    service = replace(app(MinHealthy(share=1.0)), failover_order=("eu", "ap"))
    view = view_of(service, down=("192.0.2.1",), learned=learned, peers=PEERS)
    assert answered(view) == list(AP)  # eu is below (2 of 3), ap has 1 of 1


def test_explain_shows_which_sites_were_below_and_why() -> None:
    service = app(MinHealthy(count=2))
    config = Config(site=SiteConfig("eu"), zones=(ZONE,), services=(service,))
    snapshot = Snapshot(1, {(APP, "192.0.2.1"): False, (APP, "192.0.2.2"): False})
    env = build_env(config, random.Random(1))
    text = explain(config, build_view(config, snapshot, env), env, APP, "A", "192.0.2.200")
    assert "  min_healthy: 2 (a site with fewer up endpoints of the family counts as failed)\n" in text
    assert "decision: 3 of 5 candidates healthy; site eu below min_healthy 2: 1 of 3 up, needs 2;" in text
    assert "answer: app.gslb.example.com. 30 IN A 198.51.100.1\n" in text


@pytest.mark.parametrize(
    ("threshold", "total", "needed"),
    [
        (MinHealthy(share=0.1), 30, 3),
        (MinHealthy(share=0.5), 3, 2),
        (MinHealthy(share=0.5), 4, 2),
        (MinHealthy(share=0.01), 1, 1),
        (MinHealthy(share=1.0), 7, 7),
        (MinHealthy(count=2), 1, 2),
    ],
)
def test_needed_counts(threshold: MinHealthy, total: int, needed: int) -> None:
    assert threshold.needed(total) == needed
