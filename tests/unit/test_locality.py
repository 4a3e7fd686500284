"""Locality names in the answer view: zone -> region -> global, with the CNAME chain followed in the zone."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from gslbd.answer import Answer, Chain, Rr, View, build_view
from gslbd.answer.locality import level_policy
from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.model.service import Endpoint
from gslbd.model.topology import Locality
from gslbd.model.zone import StaticRecord
from gslbd.policy.locate import build_env
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState, EndpointKind, PolicyName, Rcode

ORIGIN = "gslb.example.com."
APP = f"app.{ORIGIN}"
ZB = f"app.europe-west1-b.europe-west1.{ORIGIN}"
ZC = f"app.europe-west1-c.europe-west1.{ORIGIN}"
EU = f"app.europe-west1.{ORIGIN}"
US = f"app.us-east1.{ORIGIN}"
USB = f"app.us-east1-b.us-east1.{ORIGIN}"
SOA_NEG = Rr(ORIGIN, "SOA", 45, "ns1.gslb.example.com. hostmaster.gslb.example.com. 1 14400 3600 604800 300")

CONFIG = f"""
version: 1
site: {{name: eu, locality: {{region: europe-west1, zone: europe-west1-b}}}}
sites:
  us: {{locality: {{region: us-east1, zone: us-east1-b}}}}
zones:
  - origin: {ORIGIN}
    ttl: 300
    negative_ttl: 45
    nameservers: [{{name: ns1.{ORIGIN}, address: 127.0.0.1}}]
services:
  - name: app
    ttl: 20
    policy: failover
    failover_order: [us, eu]
    locality_names: true
    endpoints:
      - {{address: 192.0.2.1}}
      - {{address: 2001:db8::1}}
      - {{address: 192.0.2.2, locality: {{region: europe-west1, zone: europe-west1-c}}}}
      - {{address: 192.0.2.3, locality: {{region: europe-west1, zone: europe-west1-c}}}}
      - {{address: 198.51.100.1, site: us}}
  - name: plain
    endpoints: [{{address: 192.0.2.9}}]
"""


def make(text: str = CONFIG) -> Config:
    return load_config_text(text)


def view_of(config: Config, down: tuple[str, ...] = (), **snap: object) -> View:
    health = {(s.name, e.address): False for s in config.services for e in s.endpoints if e.address in down}
    snapshot = Snapshot(1, health, **snap)  # type: ignore[arg-type]
    return build_view(config, snapshot, build_env(config, random.Random(1)))


def ask(view: View, name: str, rtype: str = "A", seq: int = 0, client: str = "203.0.113.5") -> Answer:
    parts = [int(p) for p in client.split(".")]
    ip = parts[0] << 24 | parts[1] << 16 | parts[2] << 8 | parts[3]
    return view.resolve(name, rtype, ip, False, random.Random(0), seq)


def lines(answer: Answer) -> list[str]:
    return [f"{rr.name} {rr.ttl} {rr.rtype} {rr.rdata}" for rr in answer.answer]


def test_a_zone_with_healthy_endpoints_answers_them_under_its_own_name_with_the_service_ttl() -> None:
    view = view_of(make())
    assert lines(ask(view, ZB)) == [f"{ZB} 20 A 192.0.2.1"]
    assert lines(ask(view, ZB, "AAAA")) == [f"{ZB} 20 AAAA 2001:db8::1"]
    # Two endpoints in zone c: rotated per query (failover inside the level: one site, one tier).
    assert lines(ask(view, ZC, seq=0)) == [f"{ZC} 20 A 192.0.2.2", f"{ZC} 20 A 192.0.2.3"]
    assert lines(ask(view, ZC, seq=1)) == [f"{ZC} 20 A 192.0.2.3", f"{ZC} 20 A 192.0.2.2"]


def test_a_region_answers_every_healthy_endpoint_of_its_zones() -> None:
    view = view_of(make())
    assert lines(ask(view, EU)) == [f"{EU} 20 A 192.0.2.1", f"{EU} 20 A 192.0.2.2", f"{EU} 20 A 192.0.2.3"]
    assert lines(ask(view, US)) == [f"{US} 20 A 198.51.100.1"]


def test_a_zone_whose_shard_is_down_is_a_cname_to_its_region_followed_to_the_regions_healthy_shards() -> None:
    view = view_of(make(), down=("192.0.2.1", "2001:db8::1"))
    answer = ask(view, ZB)
    assert answer.rcode == Rcode.NOERROR and answer.authoritative
    assert lines(answer) == [
        f"{ZB} 20 CNAME {EU}",
        f"{EU} 20 A 192.0.2.2",
        f"{EU} 20 A 192.0.2.3",
    ]
    # The CNAME itself, and every other type, get the CNAME alone (the resolver follows it).
    assert lines(ask(view, ZB, "CNAME")) == [f"{ZB} 20 CNAME {EU}"]
    assert lines(ask(view, ZB, "TXT")) == [f"{ZB} 20 CNAME {EU}"]
    assert lines(ask(view, ZB, "ANY")) == [f"{ZB} 20 CNAME {EU}"]
    # The region has no AAAA endpoint left, so the chain ends in its NODATA: the CNAME alone.
    assert lines(ask(view, ZB, "AAAA")) == [f"{ZB} 20 CNAME {EU}"]
    assert ask(view, EU, "AAAA") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))


def test_a_region_with_nothing_healthy_leads_to_the_global_name_and_its_policy() -> None:
    view = view_of(make(), down=("198.51.100.1",))
    assert lines(ask(view, USB)) == [
        f"{USB} 20 CNAME {US}",
        f"{US} 20 CNAME {APP}",
        f"{APP} 20 A 192.0.2.1",  # failover: us is down, so eu answers (one site, rotated)
        f"{APP} 20 A 192.0.2.2",
        f"{APP} 20 A 192.0.2.3",
    ]
    assert lines(ask(view, US)) == [f"{US} 20 CNAME {APP}", *lines(ask(view, APP))]
    # The global name keeps the service's policy: us first while it is up.
    assert lines(ask(view_of(make()), APP)) == [f"{APP} 20 A 198.51.100.1"]


def test_with_nothing_healthy_anywhere_all_down_decides_at_the_global_name() -> None:
    everything = ("192.0.2.1", "2001:db8::1", "192.0.2.2", "192.0.2.3", "198.51.100.1")
    view = view_of(make(), down=everything)
    # serve_all (the default): the global name answers every endpoint by its policy.
    assert lines(ask(view, ZB))[:2] == [f"{ZB} 20 CNAME {EU}", f"{EU} 20 CNAME {APP}"]
    assert lines(ask(view, ZB))[2:] == [f"{APP} 20 A 198.51.100.1"]
    nx = make(CONFIG.replace("    policy: failover\n", "    policy: failover\n    all_down: nxdomain\n"))
    view = view_of(nx, down=everything)
    # The whole chain, then the resolver asks the global name itself and gets its NXDOMAIN.
    assert lines(ask(view, ZB)) == [f"{ZB} 20 CNAME {EU}", f"{EU} 20 CNAME {APP}"]
    assert lines(ask(view, EU)) == [f"{EU} 20 CNAME {APP}"]
    assert ask(view, APP) == Answer(Rcode.NXDOMAIN, authority=(SOA_NEG,))


def test_an_all_down_fallback_address_ends_the_chain() -> None:
    text = CONFIG.replace("    policy: failover\n", "    all_down: fallback\n    fallback: [203.0.113.80]\n")
    everything = ("192.0.2.1", "2001:db8::1", "192.0.2.2", "192.0.2.3", "198.51.100.1")
    view = view_of(make(text), down=everything)
    assert lines(ask(view, US)) == [f"{US} 20 CNAME {APP}", f"{APP} 20 A 203.0.113.80"]


def test_names_of_zones_and_regions_nobody_declares_do_not_exist() -> None:
    view = view_of(make())
    for name in (
        f"app.asia-east1.{ORIGIN}",
        f"app.europe-west1-d.europe-west1.{ORIGIN}",
        f"app.us-east1-b.{ORIGIN}",
    ):
        assert ask(view, name) == Answer(Rcode.NXDOMAIN, authority=(SOA_NEG,)), name
    # The zone b of europe-west1 does not exist inside us-east1.
    assert ask(view, f"app.europe-west1-b.us-east1.{ORIGIN}").rcode == Rcode.NXDOMAIN
    # The names between are empty non-terminals: NODATA, never NXDOMAIN.
    assert ask(view, f"europe-west1.{ORIGIN}") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))
    assert ask(view, f"europe-west1-b.europe-west1.{ORIGIN}") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))
    # A service without locality_names gets none.
    assert ask(view, f"plain.europe-west1.{ORIGIN}").rcode == Rcode.NXDOMAIN


def test_a_level_with_only_ipv4_healthy_answers_aaaa_with_nodata_not_a_cname() -> None:
    view = view_of(make(), down=("2001:db8::1",))
    assert ask(view, ZB, "AAAA") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))
    assert lines(ask(view, ZB)) == [f"{ZB} 20 A 192.0.2.1"]
    assert ask(view, ZB, "MX") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))
    reason = view.names[ZB].outcomes["AAAA"]
    assert reason.reason.startswith(
        "zone europe-west1-b of region europe-west1 has healthy endpoints but no "
    )


def test_an_endpoint_forced_down_by_an_admin_counts_as_not_healthy() -> None:
    admin = {(APP, "192.0.2.1"): AdminState.DOWN, (APP, "2001:db8::1"): AdminState.DOWN}
    view = view_of(make(), admin=admin)
    assert lines(ask(view, ZB))[0] == f"{ZB} 20 CNAME {EU}"


def test_peer_endpoints_declare_their_zones_and_answer_there() -> None:
    config = make()
    peer = Endpoint(APP, "203.0.113.7", EndpointKind.IPV4, "ap", Locality("asia-east1", "asia-east1-a"))
    view = view_of(config, peer_endpoints={APP: (peer,)})
    za = f"app.asia-east1-a.asia-east1.{ORIGIN}"
    assert lines(ask(view, za)) == [f"{za} 20 A 203.0.113.7"]
    assert lines(ask(view, f"app.asia-east1.{ORIGIN}")) == [f"app.asia-east1.{ORIGIN} 20 A 203.0.113.7"]
    # When the peer publishes nothing, names only it declared are gone.
    assert ask(view_of(config), za).rcode == Rcode.NXDOMAIN


def test_a_known_sites_locality_keeps_its_names_while_it_publishes_nothing() -> None:
    config = make()
    without_us = replace(
        config,
        services=tuple(
            replace(s, endpoints=tuple(e for e in s.endpoints if e.site != "us")) for s in config.services
        ),
    )
    view = view_of(without_us)
    # us-east1 is declared by the site `us` (sites.us.locality): a CNAME onwards, not NXDOMAIN.
    assert lines(ask(view, USB))[:2] == [f"{USB} 20 CNAME {US}", f"{US} 20 CNAME {APP}"]


def test_geo_orders_a_level_by_round_robin_and_other_policies_keep_their_own() -> None:
    assert level_policy(PolicyName.GEO) is PolicyName.ROUND_ROBIN
    for policy in (PolicyName.ROUND_ROBIN, PolicyName.RANDOM, PolicyName.WEIGHTED, PolicyName.HASH):
        assert level_policy(policy) is policy
    assert level_policy(PolicyName.FAILOVER) is PolicyName.FAILOVER
    geo = make(CONFIG.replace("policy: failover", "policy: geo"))
    view = view_of(geo)
    assert ask(view, ZC, seq=1).location_dependent is False
    assert lines(ask(view, ZC, seq=1)) == [f"{ZC} 20 A 192.0.2.3", f"{ZC} 20 A 192.0.2.2"]


def test_a_hash_service_keeps_the_answer_location_dependent_at_every_level() -> None:
    view = view_of(
        make(CONFIG.replace("policy: failover", "policy: hash")), down=("192.0.2.1", "2001:db8::1")
    )
    zb = ask(view, ZB)
    assert zb.location_dependent is True
    assert isinstance(view.names[ZB].outcome("A"), Chain)
    assert ask(view, ZC).location_dependent is True
    # The same client keeps its endpoint, whatever the query counter.
    assert lines(ask(view, ZC, seq=0, client="10.0.0.1")) == lines(ask(view, ZC, seq=5, client="10.0.0.1"))


def test_failover_inside_a_level_keeps_priority_tiers() -> None:
    text = CONFIG.replace(
        "      - {address: 192.0.2.3, locality: {region: europe-west1, zone: europe-west1-c}}",
        "      - {address: 192.0.2.3, priority: 1, locality: {region: europe-west1, zone: europe-west1-c}}",
    )
    view = view_of(make(text))
    assert lines(ask(view, ZC)) == [f"{ZC} 20 A 192.0.2.2"]
    assert lines(ask(view_of(make(text), down=("192.0.2.2",)), ZC)) == [f"{ZC} 20 A 192.0.2.3"]


@pytest.mark.parametrize("owner", [EU, ZB])
def test_a_name_the_config_defines_wins_over_a_locality_name(owner: str) -> None:
    config = make()
    zone = replace(config.zones[0], records=(StaticRecord(owner, "TXT", '"mine"', 60),))
    view = view_of(replace(config, zones=(zone,)))
    assert lines(ask(view, owner, "TXT")) == [f'{owner} 60 TXT "mine"']
    assert ask(view, owner, "A") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))
    if owner == EU:
        # Its zones then point straight at the global name.
        assert lines(ask(view_of(replace(config, zones=(zone,)), down=("192.0.2.1", "2001:db8::1")), ZB))[
            0
        ] == (f"{ZB} 20 CNAME {APP}")


def test_locality_names_inside_a_more_specific_served_zone_are_left_out() -> None:
    config = make()
    inner = replace(config.zones[0], origin=f"europe-west1.{ORIGIN}", records=())
    view = view_of(replace(config, zones=(config.zones[0], inner)))
    assert EU not in view.names
    assert ZB not in view.names
    assert US in view.names


def test_explain_reasons_say_where_and_why() -> None:
    view = view_of(make(), down=("192.0.2.1", "2001:db8::1"))
    chained = view.names[ZB].outcome("A")
    assert isinstance(chained, Chain)
    assert chained.reason == (
        f"CNAME to {EU}; region europe-west1: 2 of 3 A candidates healthy, ordered by failover"
    )


def test_a_peer_sites_configured_endpoints_give_way_to_what_that_site_publishes() -> None:
    config = make(CONFIG + "peers:\n  sites:\n    - {name: us, nameservers: ['127.0.0.3:53']}\n")
    # us publishes nothing: its configured endpoint is no candidate, but its zone keeps its name.
    view = view_of(config)
    assert lines(ask(view, USB))[:2] == [f"{USB} 20 CNAME {US}", f"{US} 20 CNAME {APP}"]
    published = Endpoint(APP, "198.51.100.1", EndpointKind.IPV4, "us", Locality("us-east1", "us-east1-b"))
    view = view_of(config, peer_endpoints={APP: (published,)})
    assert lines(ask(view, USB)) == [f"{USB} 20 A 198.51.100.1"]
