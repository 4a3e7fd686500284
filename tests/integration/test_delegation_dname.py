"""Zone cuts and DNAME in a real gslbd: the referral's shape with its glue, DS and the NSEC proving no DS
at a cut (asked with dnspython), and validating resolvers in front (Unbound, BIND) resolving through a
DNAME of gslbd's signed zone into a secure child zone delegated by it (a signed NSD), with AD; the signed
parent of gslbd's zone is another NSD. The site serves its exchange zone (peers), an unsigned child of the
signed zone delegated insecurely (model/exchange_cut.py): its SOA resolves NOERROR without AD, not bogus."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest
from dnssec_support import (
    BindResolver,
    Child,
    ds_of,
    keygen,
    resolver_test_marks,
    running_bind_resolver,
    signed_parent,
)
from gslbd_harness import Running, running_gslbd
from nsd_support import running_nsd
from unbound_support import Resolver, running_validating_unbound

pytestmark = resolver_test_marks()

ORIGIN = "gslb.example.com."
CHILD = f"child.{ORIGIN}"  # secure: its DS is a static record of gslbd's zone, served by NSD
PLAIN = f"plain.{ORIGIN}"  # insecure: no DS, so the NSEC of the cut proves there is none
EXCHANGE = f"_gslbd-exchange-eu.{ORIGIN}"  # this site's exchange zone: an insecure child


def config(ksk: Path, zsk: Path, child_ds: str) -> str:
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
peers: {{interval: 60s, sites: [{{name: us, nameservers: ["127.0.0.1:9"]}}]}}
zones:
  - origin: {ORIGIN}
    ttl: 1
    negative_ttl: 1
    nameservers: [{{name: ns1.{ORIGIN}, address: 127.0.0.1}}]
    dnssec: {{keys: ["{ksk}", "{zsk}"]}}
    records:
      - {{name: child, type: NS, value: ns1.child}}
      - {{name: ns1.child, type: A, value: 127.0.0.1}}
      - {{name: child, type: DS, value: "{child_ds}"}}
      - {{name: plain, type: NS, value: [ns1.plain, ns.example.net.]}}
      - {{name: ns1.plain, type: A, value: 127.0.0.1}}
      - {{name: old, type: DNAME, value: {CHILD}}}
      - {{name: legacy, type: DNAME, value: new.{ORIGIN}}}
services:
  - {{name: app.new.{ORIGIN}, ttl: 1, check: none, endpoints: [{{address: 192.0.2.1}}]}}
"""


@dataclass
class World:
    gslbd: Running
    unbound: Resolver
    bind: BindResolver

    def resolve(self, which: str, name: str, rtype: str) -> dns.message.Message:
        """A validating resolver's answer (DO set): Unbound's or BIND's."""
        if which == "unbound":
            return self.unbound.ask(name, rtype, dnssec=True)
        return self.bind.ask(name, rtype)

    def log(self, which: str) -> str:
        return (self.unbound if which == "unbound" else self.bind).log()[-3000:]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("cuts")
    keys = base / "keys"
    keys.mkdir()
    ksk = keygen(ORIGIN, keys)
    zsk = keygen(ORIGIN, keys, "--zsk", "--algorithm", "ecdsap256sha256")
    # The child: SOA, NS ns1.child and ns1.child A 127.0.0.1, signed by dnssec-signzone.
    child_text, child_ds = signed_parent(base / "child", [], parent=CHILD)
    parent_text, anchor = signed_parent(
        base / "parent", [Child(ORIGIN, (ds_of(ksk.with_name(ksk.name + ".key")),))]
    )
    rdata = child_ds.split(" DS ", 1)[1].strip()
    with (
        running_gslbd(base, config(ksk, zsk, rdata), zone=ORIGIN) as gslbd,
        running_nsd(base / "nsd-parent", "example.com.", parent_text) as parent,
        running_nsd(base / "nsd-child", CHILD, child_text) as child,
    ):
        forwards = {"example.com.": parent.port, ORIGIN: gslbd.port, CHILD: child.port}
        (base / "unbound").mkdir()
        with (
            running_validating_unbound(base / "unbound", anchor, forwards, ORIGIN) as unbound,
            running_bind_resolver(base / "bind", anchor, forwards, ORIGIN) as bind,
        ):
            yield World(gslbd, unbound, bind)


RESOLVERS = pytest.mark.parametrize("resolver", ["unbound", "bind"])


def test_a_name_below_a_cut_gets_a_referral_with_glue_from_the_process(world: World) -> None:
    msg = world.gslbd.ask(f"www.{PLAIN}", "A")
    assert msg.rcode() == dns.rcode.NOERROR and not msg.flags & dns.flags.AA and not msg.answer
    assert [r.to_text() for r in msg.authority] == [
        f"{PLAIN} 1 IN NS ns1.{PLAIN}\n{PLAIN} 1 IN NS ns.example.net."
    ]
    assert [r.to_text() for r in msg.additional] == [f"ns1.{PLAIN} 1 IN A 127.0.0.1"]


def test_a_signed_referral_carries_ds_or_the_nsec_proving_none(world: World) -> None:
    secure = world.gslbd.ask(f"www.{CHILD}", "A", want_dnssec=True)
    assert [(r.rdtype, r.covers) for r in secure.authority] == [
        (dns.rdatatype.NS, 0),
        (dns.rdatatype.DS, 0),
        (dns.rdatatype.RRSIG, dns.rdatatype.DS),
    ]
    insecure = world.gslbd.ask(f"www.{PLAIN}", "A", want_dnssec=True)
    nsec = insecure.authority[1]
    assert nsec.rdtype == dns.rdatatype.NSEC and nsec.name.to_text() == PLAIN
    assert insecure.authority[2].covers == dns.rdatatype.NSEC
    assert all(r.rdtype != dns.rdatatype.RRSIG for r in insecure.additional)


def test_a_dname_answer_from_the_process(world: World) -> None:
    msg = world.gslbd.ask(f"app.legacy.{ORIGIN}", "A")
    assert msg.flags & dns.flags.AA
    assert [r.to_text() for r in msg.answer] == [
        f"legacy.{ORIGIN} 1 IN DNAME new.{ORIGIN}",
        f"app.legacy.{ORIGIN} 1 IN CNAME app.new.{ORIGIN}",
        f"app.new.{ORIGIN} 1 IN A 192.0.2.1",
    ]


@RESOLVERS
def test_validating_resolvers_validate_the_secure_delegation_to_the_child(
    world: World, resolver: str
) -> None:
    msg = world.resolve(resolver, f"ns1.{CHILD}", "A")
    assert msg.rcode() == dns.rcode.NOERROR and msg.flags & dns.flags.AD
    assert msg.answer[0].to_text().endswith("IN A 127.0.0.1")


@RESOLVERS
def test_validating_resolvers_follow_a_dname_into_the_delegated_child_with_ad(
    world: World, resolver: str
) -> None:
    msg = world.resolve(resolver, f"ns1.old.{ORIGIN}", "A")
    assert msg.rcode() == dns.rcode.NOERROR, world.log(resolver)
    assert msg.flags & dns.flags.AD
    types = [r.rdtype for r in msg.answer if r.rdtype != dns.rdatatype.RRSIG]
    assert types == [dns.rdatatype.DNAME, dns.rdatatype.CNAME, dns.rdatatype.A]


@RESOLVERS
def test_validating_resolvers_validate_a_dname_chain_inside_the_zone(world: World, resolver: str) -> None:
    msg = world.resolve(resolver, f"app.legacy.{ORIGIN}", "A")
    assert msg.rcode() == dns.rcode.NOERROR and msg.flags & dns.flags.AD


@RESOLVERS
def test_validating_resolvers_validate_the_proof_of_no_ds_at_an_insecure_cut(
    world: World, resolver: str
) -> None:
    msg = world.resolve(resolver, PLAIN, "DS")
    assert msg.rcode() == dns.rcode.NOERROR and not msg.answer
    assert msg.flags & dns.flags.AD, world.log(resolver)


@RESOLVERS
def test_validating_resolvers_validate_a_dname_chain_that_ends_at_a_missing_name(
    world: World, resolver: str
) -> None:
    msg = world.resolve(resolver, f"nope.legacy.{ORIGIN}", "A")
    assert msg.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN), world.log(resolver)
    assert msg.flags & dns.flags.AD
    assert not [r for r in msg.answer if r.rdtype == dns.rdatatype.A]


@RESOLVERS
def test_validating_resolvers_validate_a_dname_chain_that_ends_in_nodata(world: World, resolver: str) -> None:
    msg = world.resolve(resolver, f"app.legacy.{ORIGIN}", "TXT")
    assert msg.rcode() == dns.rcode.NOERROR and msg.flags & dns.flags.AD, world.log(resolver)


def test_the_exchange_apex_answers_the_same_unsigned_soa_with_and_without_do(world: World) -> None:
    plain = world.gslbd.ask(EXCHANGE, "SOA")
    signed = world.gslbd.ask(EXCHANGE, "SOA", want_dnssec=True)
    for msg in (plain, signed):
        assert msg.rcode() == dns.rcode.NOERROR and msg.flags & dns.flags.AA, msg.to_text()
        assert [r.rdtype for r in msg.answer] == [dns.rdatatype.SOA]
        assert not any(r.rdtype == dns.rdatatype.RRSIG for r in [*msg.authority, *msg.additional])
    assert plain.answer == signed.answer
    ds = world.gslbd.ask(EXCHANGE, "DS", want_dnssec=True)
    nsec = next(r for r in ds.authority if r.rdtype == dns.rdatatype.NSEC)
    assert sorted(nsec[0].to_text().split()[1:]) == ["NS", "NSEC", "RRSIG"]


@RESOLVERS
def test_validating_resolvers_resolve_the_exchange_zone_as_an_insecure_child(
    world: World, resolver: str
) -> None:
    msg = world.resolve(resolver, EXCHANGE, "SOA")
    assert msg.rcode() == dns.rcode.NOERROR, world.log(resolver)
    assert [r.rdtype for r in msg.answer if r.rdtype != dns.rdatatype.RRSIG] == [dns.rdatatype.SOA]
    assert not msg.flags & dns.flags.AD, msg.to_text()  # insecure, not bogus (bogus is SERVFAIL)
    proof = world.resolve(resolver, EXCHANGE, "DS")
    assert proof.rcode() == dns.rcode.NOERROR and not proof.answer
    assert proof.flags & dns.flags.AD, world.log(resolver)
