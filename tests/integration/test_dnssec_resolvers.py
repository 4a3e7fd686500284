"""Signed answers validated by real resolvers: a signed parent (dnssec-signzone, served by NSD) holds
the DS of gslbd's zone; a validating Unbound and a validating BIND named with the parent's trust anchor
resolve every kind of answer with the AD bit; delv validates on its own; a zone whose DS does not match
its keys is bogus (SERVFAIL), so is an answer whose signature was altered on the way (a proxy in the
test), and a zone without a DS is insecure (no AD). A zone with
`denial_signing_rate: 0` answers every nonexistent name from its pre-signed NSEC chain (RFC 4035
NXDOMAIN), which both resolvers validate too."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import pytest
from dnssec_support import (
    RESOLVERS,
    BindResolver,
    Child,
    ValidatingResolver,
    delv,
    delv_anchor_file,
    dnsviz_binary,
    dnsviz_grok,
    ds_of,
    grok_problems,
    keygen,
    resolver_binary,
    resolver_param,
    resolver_test_marks,
    run,
    running_bind_resolver,
    running_validating_resolver,
    signature_breaking_proxy,
    signed_parent,
)
from gslbd_harness import Running, running_gslbd
from health_app_support import wait_until
from nsd_support import running_nsd
from unbound_support import Resolver, running_validating_unbound

pytestmark = resolver_test_marks()

ORIGIN = "gslb.example.com."
INSECURE = "insecure.example.com."
BOGUS = "bogus.example.com."
CHAIN = "chain.example.com."  # denial_signing_rate: 0: NXDOMAIN from the NSEC chain, never compact


def bind_keygen(zone: str, directory: Path) -> Path:
    """A combined signing key made by BIND's dnssec-keygen (gslbd reads BIND's files too)."""
    name = run(["dnssec-keygen", "-q", "-a", "ECDSAP256SHA256", "-f", "KSK", "-K", ".", zone], directory)
    return directory / name.strip()


def svc(name: str, *addresses: str, **settings: str) -> str:
    """One service as a YAML flow mapping (TTL 1, no checks unless `check` is given)."""
    endpoints = ", ".join(f"{{address: {a}}}" for a in addresses)
    extra = "".join(f", {k}: {v}" for k, v in {"check": "none", **settings}.items())
    return f"  - {{name: {name}, ttl: 1{extra}, endpoints: [{endpoints}]}}"


def config(ksk: Path, zsk: Path, insecure: Path, bogus: Path, chain: Path) -> str:
    def zone(origin: str, keys: list[Path], extra: str = "", ttl: int = 1) -> str:
        listed = ", ".join(f'"{k}"' for k in keys)
        return f"""
  - origin: {origin}
    negative_ttl: {ttl}
    ttl: {ttl}
    nameservers: [{{name: ns1.{origin}, address: 127.0.0.1}}]
    dnssec: {{keys: [{listed}]{extra}}}"""

    return f"""
version: 1
site: {{name: eu, locality: {{region: region-1, zone: zone-a}}}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:{zone(ORIGIN, [ksk, zsk])}
    records:
      - {{name: www, type: CNAME, value: app.{ORIGIN}}}
      - {{name: info, type: TXT, value: "hello"}}
      - {{name: mail, type: MX, value: "10 mx.example.net."}}
      - {{name: a.b.deep, type: A, value: 192.0.2.99}}{zone(INSECURE, [insecure])}{zone(BOGUS, [bogus])}
{zone(CHAIN, [chain], ", denial_signing_rate: 0", ttl=300)}
    records:
      - {{name: info, type: TXT, value: "chain"}}
      - {{name: a.b.deep, type: A, value: 192.0.2.98}}
topology: {{networks: [{{cidr: 127.0.0.0/8, site: eu}}]}}
checks:
  down: {{type: exec, command: ["/bin/false"], interval: 200ms, timeout: 150ms, rise: 1, fall: 1}}
services:
{svc(f"app.{ORIGIN}", "192.0.2.1", "192.0.2.2", '"2001:db8::1"')}
{svc(f"sticky.{ORIGIN}", "192.0.2.11", "192.0.2.12", policy="hash")}
{svc(f"primary.{ORIGIN}", "192.0.2.21", "192.0.2.22", policy="failover")}
{svc(f"geo.{ORIGIN}", "192.0.2.71", '"2001:db8::71"', policy="geo")}
{svc(f"weighted.{ORIGIN}", "192.0.2.72", "192.0.2.73", policy="weighted")}
{svc(f"random.{ORIGIN}", "192.0.2.74", "192.0.2.75", policy="random")}
{svc(f"alias.{ORIGIN}", f"app.{ORIGIN}")}
{svc(f"nx.{ORIGIN}", "192.0.2.31", all_down="nxdomain", check="down")}
{svc(f"nd.{ORIGIN}", "192.0.2.32", all_down="nodata", check="down")}
{svc(f"fb.{ORIGIN}", "192.0.2.33", all_down="fallback", fallback="[198.51.100.9]", check="down")}
  - name: loc.{ORIGIN}
    ttl: 1
    locality_names: true
    check: none
    endpoints:
      - {{address: 192.0.2.10}}
      - {{address: 192.0.2.20, locality: {{region: region-1, zone: zone-b}}}}
      - {{address: 198.51.100.30, check: down, locality: {{region: region-2, zone: zone-c}}}}
{svc(f"plain.{INSECURE}", "192.0.2.41")}
{svc(f"broken.{BOGUS}", "192.0.2.51")}
{svc(f"app.{CHAIN}", "192.0.2.61", '"2001:db8::61"')}
{svc(f"zz.{CHAIN}", "192.0.2.62")}
"""


@dataclass
class World:
    gslbd: Running
    unbound: Resolver
    bind: BindResolver
    anchor_file: Path
    ksk: Path
    workdir: Path
    parent_port: int
    chain_key: Path
    anchor: str
    forwards: dict[str, int]
    resolvers: dict[str, ValidatingResolver]  # the installed ones of RESOLVERS, Unbound and BIND too


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("dnssec")
    keys = base / "keys"
    keys.mkdir()
    ksk = keygen(ORIGIN, keys)
    zsk = keygen(ORIGIN, keys, "--zsk", "--algorithm", "ecdsap256sha256")
    insecure = bind_keygen(INSECURE, keys)
    bogus = keygen(BOGUS, keys, "--algorithm", "ed25519")
    stranger = keygen(BOGUS, keys, "--algorithm", "ed25519")  # its DS is in the parent, not its key
    chain = keygen(CHAIN, keys)
    children = [
        Child(ORIGIN, (ds_of(ksk.with_name(ksk.name + ".key")),)),
        Child(INSECURE),
        Child(BOGUS, (ds_of(stranger.with_name(stranger.name + ".key")),)),
        Child(CHAIN, (ds_of(chain.with_name(chain.name + ".key")),)),
    ]
    zone_text, anchor = signed_parent(base / "parent", children)
    with (
        running_gslbd(base, config(ksk, zsk, insecure, bogus, chain), zone=ORIGIN) as gslbd,
        running_nsd(base / "nsd", "example.com.", zone_text) as nsd,
    ):
        zones = (ORIGIN, INSECURE, BOGUS, CHAIN)
        forwards = {"example.com.": nsd.port, **{zone: gslbd.port for zone in zones}}
        (base / "unbound").mkdir()
        with (
            running_validating_unbound(base / "unbound", anchor, forwards, ORIGIN) as unbound,
            running_bind_resolver(base / "bind", anchor, forwards, ORIGIN) as bind,
            contextlib.ExitStack() as others,
        ):
            resolvers = {
                "unbound": ValidatingResolver(unbound.proc, unbound.port, unbound.log_path, "unbound"),
                "bind": bind,
            }
            for kind in RESOLVERS:
                if kind not in resolvers and resolver_binary(kind) is not None:
                    resolver = running_validating_resolver(kind, base / kind, anchor, forwards, ORIGIN)
                    resolvers[kind] = others.enter_context(resolver)
            # The checks that fail take the `down` endpoints out within a few hundred milliseconds.
            wait_until(lambda: gslbd.ask(f"nx.{ORIGIN}").rcode() == dns.rcode.NXDOMAIN, timeout=10)
            wait_until(lambda: len(gslbd.ask(f"loc.zone-c.region-2.{ORIGIN}").answer) == 3, timeout=10)
            anchor_file = delv_anchor_file(base / "anchor.conf", anchor)
            yield World(
                gslbd, unbound, bind, anchor_file, ksk, base, nsd.port, chain, anchor, forwards, resolvers
            )


# (name, type, expected rcode, whether the answer section has data)
SECURE = [
    (ORIGIN, "SOA", "NOERROR", True),
    (ORIGIN, "NS", "NOERROR", True),
    (ORIGIN, "DNSKEY", "NOERROR", True),
    (ORIGIN, "CDS", "NOERROR", True),
    (ORIGIN, "CDNSKEY", "NOERROR", True),
    (f"app.{ORIGIN}", "A", "NOERROR", True),
    (f"app.{ORIGIN}", "AAAA", "NOERROR", True),
    (f"sticky.{ORIGIN}", "A", "NOERROR", True),
    (f"primary.{ORIGIN}", "A", "NOERROR", True),
    # Every policy: geo, weighted and random vary by client or by chance, so only AD and rcode count.
    (f"geo.{ORIGIN}", "A", "NOERROR", True),
    (f"geo.{ORIGIN}", "AAAA", "NOERROR", True),
    (f"weighted.{ORIGIN}", "A", "NOERROR", True),
    (f"random.{ORIGIN}", "A", "NOERROR", True),
    (f"alias.{ORIGIN}", "A", "NOERROR", True),
    (f"www.{ORIGIN}", "A", "NOERROR", True),
    (f"info.{ORIGIN}", "TXT", "NOERROR", True),
    (f"mail.{ORIGIN}", "MX", "NOERROR", True),
    (f"fb.{ORIGIN}", "A", "NOERROR", True),
    (f"loc.zone-a.region-1.{ORIGIN}", "A", "NOERROR", True),
    (f"loc.zone-c.region-2.{ORIGIN}", "A", "NOERROR", True),
    # The names the multi-site exchange publishes (docs/multisite.md), also without peers.
    (f"heartbeat-eu.{ORIGIN}", "TXT", "NOERROR", True),
    (f"localtargets-app.{ORIGIN}", "A", "NOERROR", True),
    (f"localtargets-app.{ORIGIN}", "AAAA", "NOERROR", True),
    (f"localtargets-sticky.{ORIGIN}", "AAAA", "NOERROR", False),  # no IPv6 endpoint
    (f"localtargets-nx.{ORIGIN}", "A", "NXDOMAIN", False),  # no endpoint up
    (f"heartbeat-us.{ORIGIN}", "TXT", "NXDOMAIN", False),  # another site's
    (f"app.{ORIGIN}", "MX", "NOERROR", False),
    (f"nd.{ORIGIN}", "A", "NOERROR", False),
    (f"deep.{ORIGIN}", "A", "NOERROR", False),
    (f"nx.{ORIGIN}", "A", "NXDOMAIN", False),
    (f"nothing-here.{ORIGIN}", "A", "NXDOMAIN", False),
    (f"x.y.nothing.{ORIGIN}", "AAAA", "NXDOMAIN", False),
    # The zone that answers nonexistent names from its NSEC chain (and everything else as before).
    (f"app.{CHAIN}", "A", "NOERROR", True),
    (f"app.{CHAIN}", "MX", "NOERROR", False),
    (f"deep.{CHAIN}", "A", "NOERROR", False),
    (f"nothing-here.{CHAIN}", "A", "NXDOMAIN", False),
    (f"zzzz.{CHAIN}", "A", "NXDOMAIN", False),  # after the last name: the apex's link wraps around
    (f"x.y.nothing.{CHAIN}", "AAAA", "NXDOMAIN", False),
    (f"q.app.{CHAIN}", "A", "NXDOMAIN", False),  # below a service
    (f"q.deep.{CHAIN}", "TXT", "NXDOMAIN", False),  # below an empty non-terminal
]


def check_secure(reply: dns.message.Message, rcode: str, has_data: bool) -> None:
    assert reply.flags & dns.flags.AD, reply.to_text()
    if rcode == "NXDOMAIN" and reply.question[0].name.is_subdomain(dns.name.from_text(CHAIN)):
        assert reply.rcode() == dns.rcode.NXDOMAIN, reply.to_text()  # a traditional NSEC denial
    elif rcode == "NXDOMAIN":
        # RFC 9824: a nonexistent name is a NODATA whose NSEC has NXNAME; resolvers that know NXNAME
        # turn it back into NXDOMAIN.
        assert dns.rcode.to_text(reply.rcode()) in ("NOERROR", "NXDOMAIN"), reply.to_text()
    else:
        assert dns.rcode.to_text(reply.rcode()) == rcode, reply.to_text()
    assert bool(reply.answer) == has_data, reply.to_text()


@pytest.mark.parametrize("resolver", [resolver_param(kind) for kind in RESOLVERS])
@pytest.mark.parametrize(("name", "rtype", "rcode", "has_data"), SECURE)
def test_validating_resolvers_validate_every_kind_of_answer_with_the_ad_bit(
    world: World, resolver: str, name: str, rtype: str, rcode: str, has_data: bool
) -> None:
    check_secure(world.resolvers[resolver].ask(name, rtype), rcode, has_data)


def test_unbound_answers_a_flood_from_the_nsec_chain_it_cached_without_asking_gslbd(world: World) -> None:
    """RFC 8198: the chain's NSEC records let a validating resolver deny names itself."""
    workdir = world.workdir / "unbound-aggressive"
    workdir.mkdir()
    with running_validating_unbound(workdir, world.anchor, world.forwards, CHAIN, aggressive=True) as unbound:
        first = unbound.ask(f"flood-a.{CHAIN}", dnssec=True)
        assert first.rcode() == dns.rcode.NXDOMAIN and first.flags & dns.flags.AD, first.to_text()
        before = unbound.stats().get("num.query.aggressive.NXDOMAIN", 0)
        for label in ("flood-b", "flood-c", "flood-d", "flood-e"):
            reply = unbound.ask(f"{label}.{CHAIN}", dnssec=True)
            assert reply.rcode() == dns.rcode.NXDOMAIN and reply.flags & dns.flags.AD, reply.to_text()
        assert unbound.stats().get("num.query.aggressive.NXDOMAIN", 0) - before == 4


def test_a_locality_chain_validates_link_by_link(world: World) -> None:
    reply = world.unbound.ask(f"loc.zone-c.region-2.{ORIGIN}", "A", dnssec=True)
    assert reply.flags & dns.flags.AD
    types = [dns.rdatatype.to_text(r.rdtype) for r in reply.answer if r.rdtype != dns.rdatatype.RRSIG]
    assert types == ["CNAME", "CNAME", "A"]


@pytest.mark.parametrize("resolver", [resolver_param(kind) for kind in RESOLVERS])
def test_a_zone_without_ds_in_the_parent_is_insecure(world: World, resolver: str) -> None:
    reply = world.resolvers[resolver].ask(f"plain.{INSECURE}")
    assert reply.rcode() == dns.rcode.NOERROR and reply.answer, reply.to_text()
    assert not reply.flags & dns.flags.AD, reply.to_text()


@pytest.mark.parametrize("resolver", [resolver_param(kind) for kind in RESOLVERS])
def test_a_zone_whose_keys_do_not_match_the_parents_ds_is_bogus(world: World, resolver: str) -> None:
    reply = world.resolvers[resolver].ask(f"broken.{BOGUS}")
    assert reply.rcode() == dns.rcode.SERVFAIL, reply.to_text()


def test_an_answer_whose_signature_was_altered_on_the_way_is_bogus(world: World) -> None:
    """A man in the middle between the resolvers and gslbd flips a byte of every RRSIG of one name: that
    name is SERVFAIL, another name through the same path and the same name on the direct path are
    secure."""
    with signature_breaking_proxy(world.gslbd.port, f"app.{ORIGIN}") as proxy:
        forwards = {**world.forwards, ORIGIN: proxy.port}
        workdir = world.workdir / "tampered"
        (workdir / "unbound").mkdir(parents=True)
        with (
            running_validating_unbound(workdir / "unbound", world.anchor, forwards, ORIGIN) as unbound,
            running_bind_resolver(workdir / "bind", world.anchor, forwards, ORIGIN) as bind,
        ):
            for ask in (lambda n: unbound.ask(n, "A", dnssec=True), lambda n: bind.ask(n, "A")):
                broken_before = proxy.broken
                assert ask(f"app.{ORIGIN}").rcode() == dns.rcode.SERVFAIL
                assert proxy.broken > broken_before  # it was the altered signature that failed
                check_secure(ask(f"sticky.{ORIGIN}"), "NOERROR", has_data=True)
            assert "signature crypto failed" in unbound.log()
    check_secure(world.unbound.ask(f"app.{ORIGIN}", "A", dnssec=True), "NOERROR", has_data=True)
    check_secure(world.bind.ask(f"app.{ORIGIN}"), "NOERROR", has_data=True)


@pytest.mark.parametrize(
    ("name", "rtype"),
    [
        (f"app.{ORIGIN}", "A"),
        (f"nothing.{ORIGIN}", "A"),
        (f"app.{ORIGIN}", "TXT"),
        (f"nothing.{CHAIN}", "A"),
        (f"q.app.{CHAIN}", "A"),
    ],
)
def test_delv_validates_answers_from_the_trust_anchor(world: World, name: str, rtype: str) -> None:
    out = delv(world.anchor_file, world.unbound.port, name, rtype)
    assert "fully validated" in out.stdout, out.stdout + out.stderr
    assert "unsigned" not in out.stdout and "insecure" not in out.stdout


@pytest.mark.skipif(dnsviz_binary() is None, reason="dnsviz is not installed (scripts/test installs it)")
@pytest.mark.parametrize("zone", [ORIGIN, CHAIN], ids=["compact-denial", "nsec-chain"])
def test_dnsviz_grok_finds_no_errors_or_warnings(world: World, zone: str) -> None:
    key = world.ksk if zone == ORIGIN else world.chain_key
    ds = ds_of(key.with_name(key.name + ".key"))
    names = [zone, f"app.{zone}", f"nothing.{zone}", f"q.app.{zone}"]
    names += [f"www.{ORIGIN}", f"loc.zone-c.region-2.{ORIGIN}"] if zone == ORIGIN else [f"q.deep.{zone}"]
    workdir = world.workdir / f"dnsviz-{zone}"
    workdir.mkdir(exist_ok=True)
    found = dnsviz_grok(workdir, zone, world.gslbd.port, ds, key.with_name(key.name + ".key"), names)
    assert grok_problems(found) == []
    found_zone = found[zone]
    assert isinstance(found_zone, dict) and found_zone["delegation"]["status"] == "SECURE"


def test_doctor_checks_the_ds_in_the_parent_and_the_served_signatures(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from gslbd.cli.main import main

    code = main(
        ["doctor", "-c", str(world.gslbd.config_path), "--parent-server", f"127.0.0.1:{world.parent_port}"]
    )
    out = capsys.readouterr().out
    assert code == 1  # the insecure and the bogus zone fail, as they should
    assert f"PASS  DS of {ORIGIN} in example.com. matches a served key: " in out
    assert f"FAIL  DS of {INSECURE} in example.com. matches a served key: there is none" in out
    assert f"FAIL  DS of {BOGUS} in example.com. matches a served key: " in out
    assert f"PASS  signatures of {ORIGIN} at 127.0.0.1:{world.gslbd.port}: valid for " in out


def test_delegation_prints_the_ds_that_bind_computes_from_the_ksk(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    from gslbd.cli.main import main

    assert main(["delegation", "-c", str(world.gslbd.config_path), "--zone", ORIGIN]) == 0
    out = capsys.readouterr().out
    owner, _, _, *rdata = ds_of(world.ksk.with_name(world.ksk.name + ".key")).split()
    assert f"{owner}\t1\tIN\tDS\t{' '.join(rdata)}".lower() in out.lower()
