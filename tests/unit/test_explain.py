"""gslbd explain: the text says what the client gets and why."""

from __future__ import annotations

import ipaddress
import random
from dataclasses import replace

from gslbd.answer import View, build_view
from gslbd.explain import explain, service_lines
from gslbd.model.config import Config, SiteConfig
from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality, NetworkEntry, SiteInfo, Topology
from gslbd.model.zone import Nameserver, Soa, StaticRecord, Zone
from gslbd.policy.base import PolicyEnv
from gslbd.policy.locate import build_env
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState, AllDown, EndpointKind, PolicyName, Select

ORIGIN = "gslb.example.com."
EU = Locality("europe-west3", "europe-west3-a")
US = Locality("us-east4")
ZONE = Zone(
    ORIGIN,
    300,
    60,
    Soa("ns1.gslb.example.com.", "hostmaster.example.com.", 1),
    (Nameserver("ns1.gslb.example.com.", ("192.0.2.53",)),),
    (StaticRecord("info.gslb.example.com.", "TXT", '"hello"', 120),),
)


def ep(
    label: str, address: str, site: str, priority: int = 0, admin: AdminState = AdminState.OBEY
) -> Endpoint:
    kind = EndpointKind.IPV6 if ":" in address else EndpointKind.IPV4
    locality = EU if site == "eu" else US
    return Endpoint(f"{label}.{ORIGIN}", address, kind, site, locality, priority=priority, admin=admin)


def service(label: str, policy: PolicyName, *endpoints: Endpoint) -> Service:
    return Service(f"{label}.{ORIGIN}", ORIGIN, label, policy, endpoints=endpoints)


TWO = (("192.0.2.1", "eu"), ("198.51.100.1", "us"))
SERVICES = (
    replace(
        service(
            "app",
            PolicyName.FAILOVER,
            ep("app", "192.0.2.1", "eu"),
            ep("app", "192.0.2.2", "eu", priority=1),
            ep("app", "198.51.100.1", "us", admin=AdminState.DOWN),
            ep("app", "2001:db8::1", "eu"),
        ),
        failover_order=("eu", "us"),
    ),
    replace(
        service("w", PolicyName.WEIGHTED, *(ep("w", a, s) for a, s in TWO)), weights=(("eu", 70), ("us", 30))
    ),
    service("g", PolicyName.GEO, *(ep("g", a, s) for a, s in TWO)),
    service("h", PolicyName.HASH, *(ep("h", a, s) for a, s in TWO)),
    service("r", PolicyName.RANDOM, *(ep("r", a, s) for a, s in TWO)),
    service("rr", PolicyName.ROUND_ROBIN, *(ep("rr", a, s) for a, s in TWO)),
    replace(
        service("down", PolicyName.ROUND_ROBIN, ep("down", "192.0.2.9", "eu")), all_down=AllDown.SERVFAIL
    ),
)
CONFIG = Config(
    site=SiteConfig("eu", EU),
    zones=(ZONE,),
    services=SERVICES,
    sites=(SiteInfo("eu", EU, (50.1, 8.7)), SiteInfo("us", US, (39.0, -77.5))),
    topology=Topology(networks=(NetworkEntry(ipaddress.ip_network("10.1.0.0/16"), "us"),)),
)
SNAPSHOT = Snapshot(
    health={
        (f"app.{ORIGIN}", "192.0.2.1"): False,
        (f"app.{ORIGIN}", "192.0.2.2"): True,
        (f"down.{ORIGIN}", "192.0.2.9"): False,
    },
    peer_endpoints={f"app.{ORIGIN}": (Endpoint(f"app.{ORIGIN}", "203.0.113.7", EndpointKind.IPV4, "ap"),)},
)


def setup(config: Config = CONFIG) -> tuple[View, PolicyEnv]:
    env = build_env(config, random.Random(1))
    return build_view(config, SNAPSHOT, env), env


def run(qname: str, rtype: str, client: str, ecs: str | None = None, config: Config = CONFIG) -> str:
    view, env = setup(config)
    return explain(config, view, env, qname, rtype, client, ecs)


def test_failover_explains_every_endpoint_and_the_decision() -> None:
    assert run("App.GSLB.example.com", "a", "10.1.2.3") == (
        "question: app.gslb.example.com. A\n"
        "client: 10.1.2.3 (packet source, no ECS)\n"
        "zone: gslb.example.com.\n"
        "service: app.gslb.example.com. policy failover, ttl 30, max_answers 8, all_down serve_all\n"
        "  failover_order: eu, us\n"
        "endpoints (A):\n"
        "  192.0.2.1     site eu, region europe-west3, zone europe-west3-a  weight 1  priority 0  admin obey"
        "  health down  -> not a candidate\n"
        "  192.0.2.2     site eu, region europe-west3, zone europe-west3-a  weight 1  priority 1  admin obey"
        "  health up  -> candidate\n"
        "  198.51.100.1  site us, region us-east4  weight 1  priority 0  admin down"
        "  health up (no verdict yet)  -> not a candidate (forced down by an admin)\n"
        "  203.0.113.7   site ap  weight 1  priority 0  admin obey  health up (published by site ap)"
        "  -> candidate\n"
        "location: topology 10.1.0.0/16 -> site us, region us-east4, coordinates 39,-77.5\n"
        "decision: 2 of 4 candidates healthy\n"
        "  failover: site eu (preference 1 of 2) answers; priority tier 1 has 1 candidate(s)\n"
        "answer: NOERROR, authoritative\n"
        "  answer: app.gslb.example.com. 30 IN A 192.0.2.2\n"
    )


def test_aaaa_lists_only_that_family() -> None:
    text = run(f"app.{ORIGIN}", "AAAA", "10.1.2.3")
    assert "endpoints (AAAA):\n  2001:db8::1  site eu, region europe-west3, zone europe-west3-a" in text
    assert "192.0.2.1" not in text
    assert text.endswith("  answer: app.gslb.example.com. 30 IN AAAA 2001:db8::1\n")


def test_weighted_lists_each_answer_with_its_share() -> None:
    text = run(f"w.{ORIGIN}", "A", "10.1.2.3")
    assert (
        "decision: 2 of 2 candidates healthy\n"
        "  weighted: one site drawn per query by weight: eu 70 (70.0%), us 30 (30.0%)\n"
        "the answer varies per query, drawn by weight from 2 answers:\n"
        "   70.0%  192.0.2.1\n"
        "   30.0%  198.51.100.1\n"
        "answer: NOERROR, authoritative\n"
    ) in text


def test_random_lists_equal_shares() -> None:
    text = run(f"r.{ORIGIN}", "A", "10.1.2.3")
    assert (
        "the answer varies per query, drawn uniformly from 2 answers:\n"
        "   50.0%  192.0.2.1, 198.51.100.1\n"
        "   50.0%  198.51.100.1, 192.0.2.1\n"
    ) in text


def test_round_robin_says_the_counter_rotates() -> None:
    text = run(f"rr.{ORIGIN}", "A", "10.1.2.3")
    assert (
        "  round_robin: 2 rotations, the query counter picks one\n"
        "the answer varies per query, the query counter rotates through 2 answers:\n"
        "   50.0%  192.0.2.1, 198.51.100.1\n"
        "   50.0%  198.51.100.1, 192.0.2.1\n"
        "answer: NOERROR, authoritative\n"
        "  answer: rr.gslb.example.com. 30 IN A 192.0.2.1\n"
        "  answer: rr.gslb.example.com. 30 IN A 198.51.100.1\n"
    ) in text


def test_geo_with_ecs_locates_by_the_subnet_and_reports_the_scope() -> None:
    text = run(f"g.{ORIGIN}", "A", "192.0.2.77", ecs="10.1.7.0/24")
    assert text.startswith(
        "question: g.gslb.example.com. A\nclient: 10.1.7.0/24 from EDNS Client Subnet (source 192.0.2.77)\n"
    )
    assert "location: topology 10.1.0.0/16 -> site us, region us-east4, coordinates 39,-77.5\n" in text
    assert "  geo: same region us-east4 as the client -> 198.51.100.1\n" in text
    assert "the answer depends on the client, 4 possible answers:\n" in text
    assert text.endswith(
        # the plan used the topology network 10.1.0.0/16: that is the scope, not the source's /24
        "  answer: g.gslb.example.com. 30 IN A 198.51.100.1\nECS scope: /16 (depends on the location)\n"
    )


def test_ecs_is_ignored_when_use_client_subnet_is_off() -> None:
    config = replace(CONFIG, topology=replace(CONFIG.topology, use_client_subnet=False))
    text = run(f"g.{ORIGIN}", "A", "192.0.2.77", ecs="10.1.7.0/24", config=config)
    assert "client: 192.0.2.77 (packet source; ECS 10.1.7.0/24 ignored: use_client_subnet is off)\n" in text
    assert "location: unknown (no topology network matches and no GeoIP database is configured)\n" in text
    assert "  geo: client location unknown: all candidates -> 192.0.2.1, 198.51.100.1\n" in text
    assert "ECS scope" not in text


def test_location_independent_answer_has_ecs_scope_zero() -> None:
    assert run(f"rr.{ORIGIN}", "A", "192.0.2.77", ecs="10.9.0.0/16").endswith(
        "ECS scope: /0 (independent of the location)\n"
    )


def test_hash_names_the_subnet() -> None:
    text = run(f"h.{ORIGIN}", "A", "10.1.2.3")
    assert "  hash: client subnet 10.1.2.0/24 scored against 2 candidates (rendezvous hashing); " in text
    assert "the answer depends on the client, 2 possible answers:\n    192.0.2.1\n    198.51.100.1\n" in text


def test_all_down_servfail_gives_the_reason() -> None:
    text = run(f"down.{ORIGIN}", "A", "10.1.2.3")
    assert text.endswith(
        "decision: no healthy A candidates; all_down=servfail\nanswer: SERVFAIL, authoritative\n"
    )


def test_missing_name_is_nxdomain() -> None:
    assert run("nope.gslb.example.com.", "A", "10.1.2.3") == (
        "question: nope.gslb.example.com. A\n"
        "client: 10.1.2.3 (packet source, no ECS)\n"
        "zone: gslb.example.com.\n"
        "name: does not exist in the zone -> NXDOMAIN\n"
        "answer: NXDOMAIN, authoritative\n"
        "  authority: gslb.example.com. 30 IN SOA ns1.gslb.example.com. hostmaster.example.com. "
        "1 3600 600 604800 30\n"
    )


def test_name_outside_the_zones_is_refused() -> None:
    assert run("www.example.org.", "A", "2001:db8::5") == (
        "question: www.example.org. A\n"
        "client: 2001:db8::5 (packet source, no ECS)\n"
        "zone: none served contains this name -> REFUSED\n"
        "answer: REFUSED\n"
    )


def test_static_records_and_nodata() -> None:
    text = run("info.gslb.example.com.", "TXT", "10.1.2.3")
    assert "name: holds TXT\ndecision: records of the zone, served as they are\n" in text
    assert text.endswith('  answer: info.gslb.example.com. 120 IN TXT "hello"\n')
    nodata = run(f"app.{ORIGIN}", "MX", "10.1.2.3")
    assert "endpoints" not in nodata
    assert "decision: no data of this type\nanswer: NOERROR (NODATA), authoritative\n" in nodata


def test_empty_non_terminal_is_explained_as_nodata() -> None:
    config = replace(
        CONFIG, zones=(replace(ZONE, records=(StaticRecord(f"x.deep.{ORIGIN}", "A", "192.0.2.99", 120),)),)
    )
    text = run(f"deep.{ORIGIN}", "A", "10.1.2.3", config=config)
    assert "name: exists only because names below it exist (empty non-terminal)\n" in text
    assert "answer: NOERROR (NODATA), authoritative\n" in text


def test_a_geo_service_shows_its_bias() -> None:
    biased = replace(service("g", PolicyName.GEO, ep("g", "192.0.2.1", "eu")), bias=(("eu", 30), ("us", -5)))
    assert service_lines(biased)[1] == "  bias: eu +30, us -5 (distance x (1 - bias/100))"


def test_select_first_n_is_shown() -> None:
    chosen = replace(service("f", PolicyName.FAILOVER, ep("f", "192.0.2.1", "eu")), select=Select.FIRST_N)
    assert "  select: first_n (the first 8 of the policy's order)" in service_lines(chosen)
