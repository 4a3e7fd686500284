"""answer.build_view / View.resolve: what every kind of question gets."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from gslbd.answer import EDE_ALL_DOWN, NOT_AUTHORITATIVE, Answer, Rr, View, build_view
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Nameserver, Soa, StaticRecord, Zone
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState, AllDown, EndpointKind, PolicyName, Rcode

ORIGIN = "gslb.example.com."
SOA = Soa("ns1.gslb.example.com.", "hostmaster.example.com.", 2024010101, minimum=60)
ZONE = Zone(
    ORIGIN,
    ttl=300,
    negative_ttl=60,
    soa=SOA,
    nameservers=(
        Nameserver("ns1.gslb.example.com.", ("192.0.2.53", "2001:db8::53")),
        Nameserver("ns.example.net.", ("198.51.100.53",)),
    ),
    records=(
        StaticRecord("www.gslb.example.com.", "CNAME", "app.gslb.example.com.", 120),
        StaticRecord("info.gslb.example.com.", "TXT", '"hello"', 120),
        StaticRecord("info.gslb.example.com.", "TXT", '"world"', 120),
        StaticRecord("x.deep.gslb.example.com.", "A", "192.0.2.99", 120),
    ),
)
OTHER_ZONE = Zone(
    "sub.gslb.example.com.", 30, 30, Soa("ns1.gslb.example.com.", "hostmaster.example.com.", 7), ()
)
SOA_NEG = Rr(ORIGIN, "SOA", 60, "ns1.gslb.example.com. hostmaster.example.com. 2024010101 3600 600 604800 60")


def fqdn(label: str) -> str:
    return f"{label}.{ORIGIN}"


def ep(label: str, address: str, admin: AdminState = AdminState.OBEY) -> Endpoint:
    kind = (
        EndpointKind.HOSTNAME
        if address.endswith(".")
        else EndpointKind.IPV6
        if ":" in address
        else EndpointKind.IPV4
    )
    return Endpoint(fqdn(label), address, kind, "eu", admin=admin)


def svc(label: str, *addresses: str, **changes: Any) -> Service:
    endpoints = tuple(ep(label, a) for a in addresses)
    return replace(Service(fqdn(label), ORIGIN, label, ttl=20, endpoints=endpoints), **changes)


SERVICES = (
    svc("app", "192.0.2.10", "192.0.2.11", "2001:db8::10"),
    svc("v4only", "192.0.2.20"),
    svc("alias", "lb.example.net."),
    svc("big", *(f"192.0.2.{i}" for i in range(100, 110)), max_answers=3),
    svc("fixed", "192.0.2.30", "192.0.2.31", policy=PolicyName.FAILOVER),
    svc("serveall", "192.0.2.40", "192.0.2.41"),
    svc("nx", "192.0.2.50", all_down=AllDown.NXDOMAIN),
    svc("sf", "192.0.2.60", all_down=AllDown.SERVFAIL),
    svc("nd", "192.0.2.70", all_down=AllDown.NODATA),
    svc(
        "fb",
        "192.0.2.80",
        "2001:db8::80",
        all_down=AllDown.FALLBACK,
        fallback=("198.51.100.1", "198.51.100.2"),
    ),
    svc("fbhost", "192.0.2.90", all_down=AllDown.FALLBACK, fallback=("sorry.example.net.",)),
)
CONFIG = Config(zones=(ZONE, OTHER_ZONE), services=SERVICES)
DOWN_LABELS = ("serveall", "nx", "sf", "nd", "fb", "fbhost")
ALL_DOWN = {e.key: False for s in SERVICES if s.label in DOWN_LABELS for e in s.endpoints}


def view(snapshot: Snapshot | None = None, config: Config = CONFIG) -> View:
    snap = snapshot if snapshot is not None else Snapshot(health=ALL_DOWN)
    return build_view(config, snap, PolicyEnv(NoLocator(), {}, random.Random(1)))


def ask(name: str, rtype: str, v: View | None = None, seq: int = 0) -> Answer:
    return (v or view()).resolve(name, rtype, 0, False, random.Random(0), seq)


def a_records(label: str, ttl: int, *addresses: str, rtype: str = "A") -> tuple[Rr, ...]:
    return tuple(Rr(fqdn(label), rtype, ttl, a) for a in addresses)


def test_names_outside_every_zone_are_refused_and_not_authoritative() -> None:
    assert ask("www.example.org.", "A") == Answer(Rcode.REFUSED, authoritative=False, ede=NOT_AUTHORITATIVE)
    assert ask("example.com.", "A") == Answer(Rcode.REFUSED, authoritative=False, ede=NOT_AUTHORITATIVE)


def test_missing_name_is_nxdomain_with_the_soa() -> None:
    assert ask("nope.gslb.example.com.", "A") == Answer(Rcode.NXDOMAIN, authority=(SOA_NEG,))
    assert ask("below.app.gslb.example.com.", "AAAA") == Answer(Rcode.NXDOMAIN, authority=(SOA_NEG,))


def test_nxdomain_in_a_sub_zone_carries_that_zones_soa() -> None:
    answer = ask("nope.sub.gslb.example.com.", "A")
    assert answer.rcode == Rcode.NXDOMAIN
    assert answer.authority[0].name == "sub.gslb.example.com."


def test_aaaa_on_an_ipv4_service_is_nodata() -> None:
    assert ask(fqdn("v4only"), "AAAA") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))


def test_other_types_at_a_service_are_nodata() -> None:
    for rtype in ("MX", "TXT", "HTTPS", "SOA", "CNAME"):
        assert ask(fqdn("app"), rtype) == Answer(Rcode.NOERROR, authority=(SOA_NEG,)), rtype


def test_empty_non_terminal_is_nodata_not_nxdomain() -> None:
    assert ask("deep.gslb.example.com.", "A") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))
    assert ask("x.deep.gslb.example.com.", "A").answer == (
        Rr("x.deep.gslb.example.com.", "A", 120, "192.0.2.99"),
    )


def test_apex_soa() -> None:
    soa = Rr(
        ORIGIN, "SOA", 300, "ns1.gslb.example.com. hostmaster.example.com. 2024010101 3600 600 604800 60"
    )
    assert ask(ORIGIN, "SOA") == Answer(Rcode.NOERROR, answer=(soa,))


def test_apex_ns_with_glue_for_in_zone_names_only() -> None:
    assert ask(ORIGIN, "NS") == Answer(
        Rcode.NOERROR,
        answer=(Rr(ORIGIN, "NS", 300, "ns1.gslb.example.com."), Rr(ORIGIN, "NS", 300, "ns.example.net.")),
        additional=(
            Rr("ns1.gslb.example.com.", "A", 300, "192.0.2.53"),
            Rr("ns1.gslb.example.com.", "AAAA", 300, "2001:db8::53"),
        ),
    )


def test_in_zone_nameserver_names_answer_their_glue_addresses() -> None:
    assert ask("ns1.gslb.example.com.", "A").answer == (Rr("ns1.gslb.example.com.", "A", 300, "192.0.2.53"),)
    assert ask("ns1.gslb.example.com.", "AAAA").answer == (
        Rr("ns1.gslb.example.com.", "AAAA", 300, "2001:db8::53"),
    )
    assert ask("ns1.gslb.example.com.", "TXT") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))


def test_apex_a_is_nodata() -> None:
    assert ask(ORIGIN, "A") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))


def test_static_records_are_served_as_is() -> None:
    assert ask("info.gslb.example.com.", "TXT").answer == (
        Rr("info.gslb.example.com.", "TXT", 120, '"hello"'),
        Rr("info.gslb.example.com.", "TXT", 120, '"world"'),
    )
    cname = (Rr("www.gslb.example.com.", "CNAME", 120, "app.gslb.example.com."),)
    assert ask("www.gslb.example.com.", "CNAME").answer == cname
    # The in-zone target is followed (answer/chain.py): the CNAME, then the target's answer.
    assert ask("www.gslb.example.com.", "A").answer[:1] == cname
    assert ask("www.gslb.example.com.", "AAAA").answer[:1] == cname


def test_service_answers_its_family_with_the_service_ttl() -> None:
    answer = ask(fqdn("app"), "A")
    assert answer == Answer(Rcode.NOERROR, answer=a_records("app", 20, "192.0.2.10", "192.0.2.11"))
    assert ask(fqdn("app"), "AAAA").answer == a_records("app", 20, "2001:db8::10", rtype="AAAA")


def test_round_robin_rotates_with_the_query_counter() -> None:
    v = view()
    assert ask(fqdn("app"), "A", v, seq=1).answer == a_records("app", 20, "192.0.2.11", "192.0.2.10")
    assert ask(fqdn("app"), "A", v, seq=2).answer == a_records("app", 20, "192.0.2.10", "192.0.2.11")


def test_hostname_endpoint_is_a_cname_for_a_aaaa_and_cname() -> None:
    cname = (Rr(fqdn("alias"), "CNAME", 20, "lb.example.net."),)
    for rtype in ("A", "AAAA", "CNAME", "MX"):
        assert ask(fqdn("alias"), rtype).answer == cname, rtype


def test_max_answers_caps_the_answer() -> None:
    answer = ask(fqdn("big"), "A")
    assert answer.answer == a_records("big", 20, "192.0.2.100", "192.0.2.101", "192.0.2.102")


def test_unhealthy_endpoint_is_left_out() -> None:
    snap = Snapshot(health={(fqdn("app"), "192.0.2.10"): False})
    assert ask(fqdn("app"), "A", view(snap)).answer == a_records("app", 20, "192.0.2.11")


def test_admin_down_beats_healthy_and_admin_up_beats_unhealthy() -> None:
    snap = Snapshot(
        health={(fqdn("app"), "192.0.2.11"): False},
        admin={(fqdn("app"), "192.0.2.10"): AdminState.DOWN, (fqdn("app"), "192.0.2.11"): AdminState.UP},
    )
    assert ask(fqdn("app"), "A", view(snap)).answer == a_records("app", 20, "192.0.2.11")


def test_admin_obey_override_restores_the_checks_verdict() -> None:
    app = replace(SERVICES[0], endpoints=(ep("app", "192.0.2.10", AdminState.DOWN), ep("app", "192.0.2.11")))
    config = Config(zones=(ZONE,), services=(app,))
    assert ask(fqdn("app"), "A", view(Snapshot(), config)).answer == a_records("app", 20, "192.0.2.11")
    obey = Snapshot(admin={(fqdn("app"), "192.0.2.10"): AdminState.OBEY})
    assert ask(fqdn("app"), "A", view(obey, config)).answer == a_records(
        "app", 20, "192.0.2.10", "192.0.2.11"
    )


def test_all_down_serve_all_answers_every_endpoint() -> None:
    assert ask(fqdn("serveall"), "A").answer == a_records("serveall", 20, "192.0.2.40", "192.0.2.41")


def test_all_down_serve_all_skips_endpoints_forced_down() -> None:
    admin = {(fqdn("serveall"), "192.0.2.40"): AdminState.DOWN}
    snap = Snapshot(health=ALL_DOWN, admin=admin)
    assert ask(fqdn("serveall"), "A", view(snap)).answer == a_records("serveall", 20, "192.0.2.41")
    admin[(fqdn("serveall"), "192.0.2.41")] = AdminState.DOWN
    assert ask(fqdn("serveall"), "A", view(Snapshot(health=ALL_DOWN, admin=admin))) == Answer(
        Rcode.NOERROR, authority=(SOA_NEG,)
    )


def test_all_down_nxdomain() -> None:
    assert ask(fqdn("nx"), "A") == Answer(Rcode.NXDOMAIN, authority=(SOA_NEG,))


def test_all_down_servfail() -> None:
    assert ask(fqdn("sf"), "A") == Answer(Rcode.SERVFAIL, ede=EDE_ALL_DOWN)


def test_all_down_nodata() -> None:
    assert ask(fqdn("nd"), "A") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))


def test_all_down_fallback_addresses_of_the_asked_family() -> None:
    assert ask(fqdn("fb"), "A").answer == a_records("fb", 20, "198.51.100.1", "198.51.100.2")
    assert ask(fqdn("fb"), "AAAA") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))


def test_all_down_fallback_hostname_is_a_cname() -> None:
    cname = (Rr(fqdn("fbhost"), "CNAME", 20, "sorry.example.net."),)
    assert ask(fqdn("fbhost"), "A").answer == cname


def test_all_down_applies_per_family() -> None:
    snap = Snapshot(health={(fqdn("app"), "2001:db8::10"): False})
    v = view(snap)
    assert ask(fqdn("app"), "AAAA", v).answer == a_records("app", 20, "2001:db8::10", rtype="AAAA")
    assert len(ask(fqdn("app"), "A", v).answer) == 2


def test_failover_service_answers_its_preferred_tier() -> None:
    assert ask(fqdn("fixed"), "A").answer == a_records("fixed", 20, "192.0.2.30", "192.0.2.31")


def test_peer_endpoints_join_the_candidates() -> None:
    peer = Endpoint(fqdn("v4only"), "203.0.113.5", EndpointKind.IPV4, "us")
    snap = Snapshot(health={(fqdn("v4only"), "192.0.2.20"): False}, peer_endpoints={fqdn("v4only"): (peer,)})
    assert ask(fqdn("v4only"), "A", view(snap)).answer == a_records("v4only", 20, "203.0.113.5")


def test_any_is_a_minimal_answer() -> None:
    assert ask(fqdn("app"), "ANY").answer == a_records("app", 20, "192.0.2.10", "192.0.2.11")
    assert ask("info.gslb.example.com.", "ANY").answer[0].rtype == "TXT"
    assert ask("deep.gslb.example.com.", "ANY") == Answer(Rcode.NOERROR, authority=(SOA_NEG,))


def test_location_independent_answers_say_so() -> None:
    assert ask(fqdn("app"), "A").location_dependent is False
