"""Two sites of one signed zone behind one validating resolver: the parent `test.` (dnssec-signzone,
served by NSD) delegates gslb.test. with a DS to two nameservers, the gslbd sites eu (127.0.0.2) and us
(127.0.0.3), peers of each other, which share the zone's key files (docs/dnssec.md, "Multi-site: one
DNSKEY set"). A validating Unbound with the parent's trust anchor sends each query of the zone to either
site (a stub-zone with both addresses: Unbound picks one per query) and its cache of the zone is flushed
before every round, so the DNSKEY RRset it validates with comes from one site as often as not and the
answers from the other: every answer must have the AD bit, none may be SERVFAIL, and both sites must have
answered."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import dns.flags
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import pytest
from dnssec_support import Child, ds_of, keygen, resolver_test_marks, signed_parent
from exchange_sites import (
    HOSTS,
    ZONE,
    addresses,
    api_url,
    metric,
    running_sites,
    site_config,
    sites_port,
    wait_for,
)
from gslbd_harness import Running, free_port
from nsd_support import running_nsd
from unbound_support import Resolver, running_validating_unbound

pytestmark = resolver_test_marks()

PARENT = "test."
SITES = ("eu", "us")
EU, US = "192.0.2.1", "198.51.100.1"
ROUNDS = 20
POLICY_ANSWERS = "gslbd_dns_policy_answers_total"


def services() -> str:
    """One service of every policy, each with an endpoint at both sites."""

    def service(name: str, policy: str, extra: str = "") -> str:
        return f"""\
  - name: {name}
    policy: {policy}{extra}
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {US}, site: us}}
"""

    return (
        service("rr", "round_robin")
        + service("w", "weighted", "\n    weights: {eu: 3, us: 1}")
        + service("fo", "failover", "\n    failover_order: [eu, us]")
        + service("geo", "geo")
        + service("rnd", "random")
        + service("hash", "hash")
    )


# (name, type): every kind of answer the zone gives; heartbeat-<site> exists only at its own site (the
# other one denies it), localtargets-rr is each site's own endpoint: the answer depends on who is asked.
NAMES = [
    (ZONE, "SOA"),
    (ZONE, "NS"),
    (ZONE, "DNSKEY"),
    *((f"{label}.{ZONE}", "A") for label in ("rr", "w", "fo", "geo", "rnd", "hash")),
    (f"rr.{ZONE}", "AAAA"),  # NODATA
    (f"rr.{ZONE}", "MX"),  # NODATA
    (f"nothing-here.{ZONE}", "A"),  # NXDOMAIN (compact denial)
    (f"localtargets-rr.{ZONE}", "A"),
    (f"localtargets-nothing.{ZONE}", "A"),  # NXDOMAIN: no such service
    *((f"heartbeat-{site}.{ZONE}", "TXT") for site in SITES),
]


@dataclass
class World:
    sites: dict[str, Running]
    unbound: Resolver
    apis: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("dnssec-sites")
    keys = base / "keys"
    keys.mkdir()
    ksk = keygen(ZONE, keys)
    zsk = keygen(ZONE, keys, "--zsk")
    dnssec = f'    dnssec: {{keys: ["{ksk}", "{zsk}"]}}\n'  # the same files for both sites
    port = sites_port(SITES)
    apis = {s: api_url(s, free_port((HOSTS[s],))) for s in SITES}
    configs = {
        s: site_config(
            s,
            port,
            services(),
            sites=SITES,
            zone_extra=dnssec,
            extra=(
                f'api: {{listen: "{apis[s].removeprefix("http://")}"}}\n'
                "topology: {networks: [{cidr: 127.0.0.0/8, site: eu}]}\n"
            ),
        )
        for s in SITES
    }
    nameservers = tuple((f"gslb-ns-{s}-{ZONE}", HOSTS[s]) for s in SITES)
    child = Child(ZONE, (ds_of(ksk.with_name(ksk.name + ".key")),), nameservers)
    zone_text, anchor = signed_parent(base / "parent", [child], parent=PARENT)
    with (
        running_sites(base, configs, port) as running,
        running_nsd(base / "nsd", PARENT, zone_text) as nsd,
    ):
        for server in running.values():  # each site has learned the other's endpoint
            wait_for(lambda server=server: addresses(server, f"rr.{ZONE}") == {EU, US}, 10)
        stubs = {PARENT: nsd.port, ZONE: tuple(f"{HOSTS[s]}@{port}" for s in SITES)}
        (base / "unbound").mkdir()
        with running_validating_unbound(base / "unbound", anchor, stubs, ZONE, control=True) as unbound:
            yield World(running, unbound, apis)


def test_a_resolver_asking_both_sites_of_a_signed_zone_validates_every_answer(world: World) -> None:
    before = {s: metric(url, POLICY_ANSWERS) for s, url in world.apis.items()}
    problems: list[str] = []
    for _ in range(ROUNDS):
        world.unbound.control("flush_zone", ZONE)  # answers and keys: the next ones come from either site
        for name, rtype in NAMES:
            reply = world.unbound.ask(name, rtype, dnssec=True)
            if not reply.flags & dns.flags.AD or reply.rcode() not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
                problems.append(f"{name} {rtype}: {dns.rcode.to_text(reply.rcode())}\n{reply.to_text()}")
    assert problems == [], "\n".join(problems)
    # Unbound retries a bogus answer at the other server, which would hide a site that signs with a key
    # the other's DNSKEY set lacks: it counts every RRset that failed to validate, retried or not.
    assert world.unbound.stats()["num.rrset.bogus"] == 0
    answered = {s: metric(url, POLICY_ANSWERS) - before[s] for s, url in world.apis.items()}
    assert all(answered.values()), answered  # both sites answered the resolver's service queries
    assert sum(answered.values()) >= ROUNDS * 6, answered  # every round asked the sites anew


def test_both_sites_serve_one_dnskey_rrset_and_sign_by_themselves(world: World) -> None:
    """The documented choice: one DNSKEY set through shared files, each site signing on its own."""
    dnskeys, signatures = set(), set()
    for server in world.sites.values():
        reply = server.ask(ZONE, "DNSKEY", want_dnssec=True)
        dnskey = reply.find_rrset(
            reply.answer, dns.name.from_text(ZONE), dns.rdataclass.IN, dns.rdatatype.DNSKEY
        )
        dnskeys.add(frozenset(rd.to_text() for rd in dnskey))
        reply = server.ask(f"rr.{ZONE}", "A", want_dnssec=True)
        signatures.update(
            rd.signature for rrset in reply.answer if rrset.rdtype == dns.rdatatype.RRSIG for rd in rrset
        )
    assert len(dnskeys) == 1 and len(next(iter(dnskeys))) == 2
    assert len(signatures) == 2  # ECDSA: two signers, two signatures of one RRset
