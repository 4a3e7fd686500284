"""Signed answers (DO set) from the answer table: every RRset validates, negatives use RFC 9824 compact
denial, nothing changes without DO, the fast and slow paths agree, and known variants cost no signing."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import dns.dnssec
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from test_wire_services import CONFIG as SERVICES_CONFIG
from wire_support import (
    CONFIG,
    INNER,
    INNER_ZONE,
    ORIGIN,
    OTHER_ZONE,
    SERVICES,
    ZONE,
    ask,
    ask_wire,
    make_snapshot,
    query,
)

from gslbd.clock import FakeClock
from gslbd.config import load_config_text
from gslbd.config.dnssec import ds_text, generate_key_pair, read_key_pair
from gslbd.model.config import Config
from gslbd.model.dnssec import Dnssec
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, dnssec
from gslbd.wire.dnssec import CO

ZONE_NAME = dns.name.from_text(ORIGIN)
NXNAME = 128


def signed_config(tmp: Path, algorithm: int, split: bool) -> Config:
    paths = [generate_key_pair(ORIGIN, algorithm, True, tmp)]
    if split:
        paths.append(generate_key_pair(ORIGIN, algorithm, False, tmp))
    keys = tuple(read_key_pair(p, ORIGIN) for p in paths)
    dnssec = Dnssec(keys, cds=tuple(ds_text(ORIGIN, k) for k in keys if k.sep))
    return replace(CONFIG, zones=(replace(ZONE, dnssec=dnssec), INNER_ZONE, OTHER_ZONE))


def signed_services_config(tmp: Path) -> Config:
    """The services world (HTTPS, SRV, a wildcard service) with its zone signed."""
    config = load_config_text(SERVICES_CONFIG)
    zone = config.zones[0]
    keys = tuple(
        read_key_pair(generate_key_pair(zone.origin, 13, sep, tmp), zone.origin) for sep in (True, False)
    )
    return replace(config, zones=(replace(zone, dnssec=Dnssec(keys)), *config.zones[1:]))


class World:
    def __init__(self, config: Config) -> None:
        self.clock = FakeClock()
        self.builder = AnswerBuilder(self.clock)
        self.env = PolicyEnv(NoLocator(), {}, random.Random(1))
        self.config = config
        self.view, self.table = self.builder.build(config, make_snapshot(), self.env)
        self.responder = Responder(self.table, self.view, random.Random(3))
        self.keyset = ask(self.responder, query(ORIGIN, "DNSKEY", dnssec_ok=True)).answer[0]

    def rebuild(self, snapshot: Snapshot) -> None:
        self.view, self.table = self.builder.build(self.config, snapshot, self.env)
        self.responder.swap(self.table, self.view)

    def validate(self, msg: dns.message.Message) -> int:
        """Validate every RRset of the zone in the message with its RRSIGs; the number validated."""
        count = 0
        for section in (msg.answer, msg.authority, msg.additional):
            sigs = {(r.name, r.covers): r for r in section if r.rdtype == dns.rdatatype.RRSIG}
            for rrset in section:
                if rrset.rdtype == dns.rdatatype.RRSIG or not rrset.name.is_subdomain(ZONE_NAME):
                    continue
                sig = sigs.get((rrset.name, rrset.rdtype))
                assert sig is not None, f"no RRSIG for {rrset}"
                now = self.clock.wall()
                dns.dnssec.validate(rrset, sig, {ZONE_NAME: self.keyset}, now=now)
                count += 1
        return count


@pytest.fixture(scope="module", params=[(13, True), (15, False)], ids=["ecdsa-ksk-zsk", "ed25519-csk"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> World:
    algorithm, split = request.param
    return World(signed_config(tmp_path_factory.mktemp("keys"), algorithm, split))


QUESTIONS = [
    ("app", "A"),
    ("app", "AAAA"),
    ("big", "A"),
    ("alias", "A"),
    ("sticky", "A"),
    ("shuffled", "A"),
    ("primary", "A"),
    ("split", "A"),
    ("near", "A"),
    ("fb", "A"),
    ("fb", "AAAA"),
    ("www", "A"),
    ("info", "TXT"),
    ("mail", "MX"),
    ("x.deep", "A"),
    ("@", "SOA"),
    ("@", "NS"),
    ("@", "DNSKEY"),
    ("@", "CDS"),
    ("@", "CDNSKEY"),
    ("app", "ANY"),
]


def qname(label: str) -> str:
    return ORIGIN if label == "@" else f"{label}.{ORIGIN}"


@pytest.mark.parametrize(("label", "rtype"), QUESTIONS)
def test_every_positive_rrset_carries_a_valid_rrsig(world: World, label: str, rtype: str) -> None:
    msg = ask(world.responder, query(qname(label), rtype, dnssec_ok=True))
    assert msg.rcode() == dns.rcode.NOERROR and msg.answer
    assert world.validate(msg) >= 1
    assert not msg.flags & dns.flags.AD


def nsec_of(msg: dns.message.Message) -> dns.rrset.RRset:
    [nsec] = [r for r in msg.authority if r.rdtype == dns.rdatatype.NSEC]
    return nsec


def bitmap_types(nsec: dns.rrset.RRset) -> set[int]:
    rd = nsec[0]
    return {
        w * 256 + i * 8 + b
        for w, bits in rd.windows
        for i, byte in enumerate(bits)
        for b in range(8)
        if byte & (0x80 >> b)
    }


@pytest.mark.parametrize("name", [f"nothing.{ORIGIN}", f"a.b.c.{ORIGIN}", f"nx.{ORIGIN}", f"*.x.{ORIGIN}"])
def test_a_name_that_does_not_exist_gets_compact_denial_with_nxname(world: World, name: str) -> None:
    msg = ask(world.responder, query(name.upper(), "A", dnssec_ok=True))
    assert msg.rcode() == dns.rcode.NOERROR and not msg.answer
    nsec = nsec_of(msg)
    assert nsec.name == dns.name.from_text(name)
    assert nsec[0].next == dns.name.from_text("\\000." + name)
    assert bitmap_types(nsec) == {dns.rdatatype.RRSIG, dns.rdatatype.NSEC, NXNAME}
    assert world.validate(msg) == 2  # SOA and NSEC


def test_the_co_flag_restores_the_nxdomain_rcode_and_is_echoed(world: World) -> None:
    wire = query(f"nothing.{ORIGIN}", "A", dnssec_ok=True)
    msg = dns.message.from_wire(wire)
    msg.use_edns(0, dns.flags.DO | CO, 1232)
    reply = ask(world.responder, msg.to_wire())
    assert reply.rcode() == dns.rcode.NXDOMAIN
    assert reply.ednsflags & CO
    assert bitmap_types(nsec_of(reply)) == {dns.rdatatype.RRSIG, dns.rdatatype.NSEC, NXNAME}
    world.validate(reply)


@pytest.mark.parametrize(
    ("label", "rtype", "types"),
    [
        ("app", "MX", {"A", "AAAA"}),
        ("nd", "A", set()),
        ("info", "A", {"TXT"}),
        ("deep", "A", set()),  # an empty non-terminal
        ("@", "MX", {"SOA", "NS", "DNSKEY", "CDS", "CDNSKEY"}),
    ],
)
def test_nodata_proves_the_types_at_the_name_with_a_minimal_bitmap(
    world: World, label: str, rtype: str, types: set[str]
) -> None:
    msg = ask(world.responder, query(qname(label), rtype, dnssec_ok=True))
    assert msg.rcode() == dns.rcode.NOERROR and not msg.answer
    expected = {dns.rdatatype.from_text(t) for t in types} | {dns.rdatatype.RRSIG, dns.rdatatype.NSEC}
    assert bitmap_types(nsec_of(msg)) == expected
    assert world.validate(msg) == 2


@pytest.mark.parametrize(("label", "rtype"), [*QUESTIONS, ("nothing", "A"), ("app", "MX"), ("sf", "A")])
def test_without_do_nothing_is_added(world: World, label: str, rtype: str) -> None:
    for edns in (None, 0):
        wire = query(qname(label), rtype, edns=edns)
        replies = []
        for config in (world.config, CONFIG):  # signed, and the same zone unsigned
            view, table = AnswerBuilder(world.clock).build(config, make_snapshot(), world.env)
            replies.append(ask_wire(Responder(table, view, random.Random(3)), wire))
        signed_reply, plain_reply = replies
        if rtype in ("DNSKEY", "CDS", "CDNSKEY", "ANY") or label == "@":
            msg = dns.message.from_wire(signed_reply or b"")
            assert not any(r.rdtype == dns.rdatatype.RRSIG for r in [*msg.answer, *msg.authority])
            assert not any(r.rdtype == dns.rdatatype.NSEC for r in msg.authority)
        else:
            assert signed_reply == plain_reply


def slow(world: World, wire: bytes) -> bytes | None:
    from gslbd.wire import slow_response

    return slow_response(
        wire,
        world.view,
        0xCB007105,
        False,
        tcp=False,
        max_udp_payload=1232,
        use_client_subnet=True,
        rng=random.Random(3),
        seq=0,
        signer=world.table.signer,
        signed_zones=world.table.signed_zones,
    )


@pytest.mark.parametrize(
    ("label", "rtype"),
    [
        ("solo", "A"),
        ("www", "A"),
        ("info", "TXT"),
        ("@", "DNSKEY"),
        ("nothing", "A"),
        ("app", "MX"),
        ("nd", "A"),
    ],
)
def test_the_slow_path_signs_like_the_fast_path(world: World, label: str, rtype: str) -> None:
    wire = query(qname(label), rtype, dnssec_ok=True)
    fast = dns.message.from_wire(ask_wire(world.responder, wire) or b"")
    slow_reply = dns.message.from_wire(slow(world, wire) or b"")
    # Same records and signatures (compression may differ; a rotating answer, as www's chain into app's
    # round robin, may list its RRset in another order, which its RRSIG does not depend on).
    assert (fast.rcode(), fast.flags, fast.ednsflags) == (
        slow_reply.rcode(),
        slow_reply.flags,
        slow_reply.ednsflags,
    )
    for mine, theirs in zip(
        (fast.answer, fast.authority, fast.additional),
        (slow_reply.answer, slow_reply.authority, slow_reply.additional),
        strict=True,
    ):
        assert mine == theirs


def test_a_do_query_for_a_known_variant_costs_no_signing(world: World) -> None:
    signer = world.table.signer
    assert signer is not None
    for label, rtype in QUESTIONS:
        ask_wire(world.responder, query(qname(label), rtype, dnssec_ok=True))
    before = signer.signatures_made
    for _ in range(3):
        for label, rtype in QUESTIONS:
            ask_wire(world.responder, query(qname(label), rtype, dnssec_ok=True))
        ask_wire(world.responder, query(f"first-time.{ORIGIN}", "A", dnssec_ok=True))
    # Only the denial of a name never asked before is signed (once, then cached): one key signs it.
    assert signer.signatures_made == before + 1


def test_a_health_change_signs_only_the_rrsets_that_changed(tmp_path: Path) -> None:
    world = World(signed_config(tmp_path, 13, True))
    signer = world.table.signer
    assert signer is not None
    before = signer.signatures_made
    app = next(s for s in SERVICES if s.label == "app")
    health = dict(make_snapshot().health)
    health[app.endpoints[0].key] = False  # 192.0.2.1 down: a new A RRset; AAAA and NSEC unchanged
    world.rebuild(Snapshot(version=2, health=health))
    assert not world.builder.last_full
    assert signer.signatures_made - before == 1  # every round robin rotation is one RRset
    msg = ask(world.responder, query(f"app.{ORIGIN}", "A", dnssec_ok=True))
    assert sorted(rd.to_text() for rd in msg.answer[0]) == ["192.0.2.2", "192.0.2.3"]
    assert world.validate(msg) == 1


def test_signatures_near_expiry_are_made_anew_by_a_full_rebuild(tmp_path: Path) -> None:
    world = World(signed_config(tmp_path, 13, True))
    old = ask(world.responder, query(f"app.{ORIGIN}", "A", dnssec_ok=True))
    old_sig = next(r for r in old.answer if r.rdtype == dns.rdatatype.RRSIG)[0]
    assert not world.builder.resign_due()
    at = world.builder.resign_at()
    assert at is not None and at <= world.clock.wall() + 5 * 86400
    world.clock.advance(at - world.clock.wall() - 1)
    assert not world.builder.resign_due()
    world.clock.advance(5 * 86400)  # validity 7d - refresh_before 2d: every signature is due
    assert world.builder.resign_due()
    world.rebuild(make_snapshot())
    assert world.table.derived_from == 0  # compiled whole
    new = ask(world.responder, query(f"app.{ORIGIN}", "A", dnssec_ok=True))
    new_sig = next(r for r in new.answer if r.rdtype == dns.rdatatype.RRSIG)[0]
    assert new_sig.expiration > old_sig.expiration
    world.validate(new)


def test_an_unsigned_child_zone_under_a_signed_zone_stays_unsigned(world: World) -> None:
    for name, rtype in (
        (f"svc.{INNER}", "A"),
        (f"nothing.{INNER}", "A"),
        (INNER, "SOA"),
        (f"svc.{INNER}", "MX"),
    ):
        msg = ask(world.responder, query(name, rtype, dnssec_ok=True))
        records = [*msg.answer, *msg.authority]
        assert records and not any(r.rdtype in (dns.rdatatype.RRSIG, dns.rdatatype.NSEC) for r in records)


def test_an_explicit_nxname_query_gets_formerr(world: World) -> None:
    for dnssec_ok in (False, True):
        msg = ask(world.responder, query(f"app.{ORIGIN}", 128, dnssec_ok=dnssec_ok))
        assert msg.rcode() == dns.rcode.FORMERR and not msg.answer


def test_with_the_co_flag_all_down_nxdomain_is_nxdomain_too(world: World) -> None:
    msg = dns.message.from_wire(query(f"nx.{ORIGIN}", "A", dnssec_ok=True))
    msg.use_edns(0, dns.flags.DO | CO, 1232)
    reply = ask(world.responder, msg.to_wire())
    assert reply.rcode() == dns.rcode.NXDOMAIN and reply.ednsflags & CO
    assert bitmap_types(nsec_of(reply)) == {dns.rdatatype.RRSIG, dns.rdatatype.NSEC, NXNAME}


@pytest.mark.parametrize(
    ("label", "rtype"), [("app", "A"), ("info", "TXT"), ("app", "MX"), ("nd", "A"), ("co-fast", "A")]
)
def test_co_queries_answer_as_the_slow_path_writes_them(world: World, label: str, rtype: str) -> None:
    """RFC 9824's CO flag: positive answers and NODATA as with DO alone, a compact denial NXDOMAIN with CO
    echoed (from C, but for a compact denial signed fresh, which Python makes)."""
    msg = dns.message.from_wire(query(qname(label), rtype, dnssec_ok=True))
    msg.use_edns(0, dns.flags.DO | CO, 1232)
    wire = msg.to_wire()
    responder = Responder(world.table, world.view, random.Random(3))
    fast = dns.message.from_wire(ask_wire(responder, wire) or b"")
    slow_reply = dns.message.from_wire(slow(world, wire) or b"")
    assert (fast.rcode(), fast.flags, fast.ednsflags) == (
        slow_reply.rcode(),
        slow_reply.flags,
        slow_reply.ednsflags,
    )
    assert fast.authority == slow_reply.authority
    assert bool(fast.ednsflags & CO) == (label == "co-fast")  # echoed only with a compact NXDOMAIN
    world.validate(fast)


def test_signatures_of_wildcard_answers_are_kept_in_a_bounded_lru(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wildcard's answer is signed at the name asked (on the query path): random names below it would
    grow the signer's cache forever. They go to an LRU of SYNTH_CACHE_MAX RRsets instead."""
    monkeypatch.setattr(dnssec, "SYNTH_CACHE_MAX", 3)
    config = signed_services_config(tmp_path)
    clock = FakeClock()
    view, table = AnswerBuilder(clock).build(config, Snapshot(), PolicyEnv(NoLocator(), {}, random.Random(1)))
    signer = table.signer
    assert signer is not None
    responder = Responder(table, view, random.Random(3))
    zone = dns.name.from_text(config.zones[0].origin)
    keyset = ask(responder, query(zone.to_text(), "DNSKEY", dnssec_ok=True)).answer[0]
    cached = signer.next_refresh(), len(signer._cache)

    def ask_below(label: str) -> None:
        msg = ask(responder, query(f"{label}.apps.{zone}", "A", dnssec_ok=True))
        assert msg.rcode() == dns.rcode.NOERROR and msg.answer
        [rrset] = [r for r in msg.answer if r.rdtype == dns.rdatatype.A]
        [sig] = [r for r in msg.answer if r.rdtype == dns.rdatatype.RRSIG]
        dns.dnssec.validate(rrset, sig, {zone: keyset}, now=clock.wall())

    for i in range(10):
        ask_below(f"random-{i}")
    assert signer.synthesized_count() == 3
    assert (signer.next_refresh(), len(signer._cache)) == cached  # the RRset cache did not grow
    made = signer.signatures_made
    ask_below("random-9")  # recently used: still cached
    assert signer.signatures_made == made
    ask_below("random-0")  # evicted long ago: signed again
    assert signer.signatures_made > made and signer.synthesized_count() == 3
