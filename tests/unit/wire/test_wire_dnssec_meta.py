"""Signed answers at wildcard-made names (RFC 4592) and to questions for NSEC and RRSIG (RFC 4035).

Every answer is checked with dnspython's validator against the zone's DNSKEY set; the C table, the Python
fast path and the slow path must give the same bytes (the first two hand these questions to the last)."""

from __future__ import annotations

import random
from pathlib import Path

import dns.dnssec
import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ctable import with_co
from test_wire_dnssec import World, bitmap_types, nsec_of, signed_config, signed_services_config
from test_wire_services import ZONE as SERVICES_ZONE
from wire_support import ORIGIN, ask, client, next_count, query

from gslbd.clock import FakeClock
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, ctable, slow_response
from gslbd.wire.dnssec import NXNAME

NSEC = dns.rdatatype.NSEC
RRSIG = dns.rdatatype.RRSIG
A, HTTPS, AAAA, CNAME = dns.rdatatype.A, dns.rdatatype.HTTPS, dns.rdatatype.AAAA, dns.rdatatype.CNAME


class Services:
    """The signed services world (a wildcard `*.apps`, HTTPS, SRV, static records)."""

    def __init__(self, tmp: Path) -> None:
        self.clock = FakeClock()
        config = signed_services_config(tmp)
        self.view, self.table = AnswerBuilder(self.clock).build(
            config, Snapshot(), PolicyEnv(NoLocator(), {}, random.Random(1))
        )
        self.zone = dns.name.from_text(SERVICES_ZONE)
        self.responder = Responder(self.table, self.view, random.Random(3))
        self.keyset = ask(self.responder, query(SERVICES_ZONE, "DNSKEY", dnssec_ok=True)).answer[0]

    def ask(self, name: str, rtype: str, *, co: bool = False) -> dns.message.Message:
        wire = query(f"{name}.{SERVICES_ZONE}" if name else SERVICES_ZONE, rtype, dnssec_ok=True)
        return ask(self.responder, with_co(wire) if co else wire)

    def validate(self, msg: dns.message.Message) -> int:
        """Validate every non-RRSIG RRset of the message with its RRSIGs; the number validated."""
        count = 0
        for section in (msg.answer, msg.authority):
            sigs = {(r.name, r.covers): r for r in section if r.rdtype == RRSIG}
            for rrset in section:
                if rrset.rdtype != RRSIG:
                    dns.dnssec.validate(
                        rrset,
                        sigs[(rrset.name, rrset.rdtype)],
                        {self.zone: self.keyset},
                        now=self.clock.wall(),
                    )
                    count += 1
        return count


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Services:
    return Services(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(signed_config(tmp_path_factory.mktemp("keys"), 13, True))


@pytest.mark.parametrize("name", ["x.apps", "deeper.x.apps", "Mixed-Case.apps"])
@pytest.mark.parametrize("co", [False, True])
def test_a_type_missing_at_a_wildcard_made_name_is_nodata_never_a_denial_of_the_name(
    services: Services, name: str, co: bool
) -> None:
    """RFC 4592/4035: `x.apps` made by `*.apps` exists; TXT there is NODATA whose NSEC (at the name, as
    the wildcard's positive answers are signed there) lists the wildcard's types and no NXNAME; CO does
    not turn it into NXDOMAIN (an RFC 9824 resolver would deny the wildcard's answers with it)."""
    msg = services.ask(name, "TXT", co=co)
    assert msg.rcode() == dns.rcode.NOERROR and not msg.answer
    assert not msg.ednsflags & 0x4000  # CO is echoed only with a compact denial of a nonexistent name
    nsec = nsec_of(msg)
    assert nsec.name == dns.name.from_text(f"{name}.{SERVICES_ZONE}")
    assert bitmap_types(nsec) == {A, HTTPS, RRSIG, NSEC}
    assert services.validate(msg) == 2  # SOA and NSEC
    positive = services.ask(name, "A")
    assert positive.rcode() == dns.rcode.NOERROR and services.validate(positive) == 1


def test_a_nonexistent_name_beside_the_wildcard_is_still_denied(services: Services) -> None:
    msg = services.ask("nothing", "TXT")
    assert bitmap_types(nsec_of(msg)) == {RRSIG, NSEC, NXNAME}


@pytest.mark.parametrize(
    ("name", "types"),
    [
        ("web", {A, AAAA, HTTPS}),
        ("www", {CNAME}),  # NSEC and RRSIG exist beside a CNAME (RFC 4035 2.5): not followed
        ("x.apps", {A, HTTPS}),  # made by the wildcard
        ("apps", set()),  # an empty non-terminal
    ],
)
def test_an_nsec_question_at_a_name_that_exists_gets_the_nsec_its_nodata_carries(
    services: Services, name: str, types: set[int]
) -> None:
    msg = services.ask(name, "NSEC")
    assert msg.rcode() == dns.rcode.NOERROR and not msg.authority
    [nsec] = [r for r in msg.answer if r.rdtype == NSEC]
    assert nsec.name == dns.name.from_text(f"{name}.{SERVICES_ZONE}")
    assert bitmap_types(nsec) == {*types, RRSIG, NSEC}
    assert services.validate(msg) == 1
    if CNAME not in types:  # any other type at a CNAME follows it
        assert nsec_of(services.ask(name, "MX")) == nsec


@pytest.mark.parametrize(
    ("name", "covered"),
    [
        ("web", {A, AAAA, HTTPS, NSEC}),
        ("x.apps", {A, HTTPS, NSEC}),
        ("www", {CNAME, NSEC}),
        ("apps", {NSEC}),
    ],
)
def test_an_rrsig_question_gets_the_signatures_of_every_rrset_at_the_name(
    services: Services, name: str, covered: set[int]
) -> None:
    """As Knot answers (every RRSIG of the node), each the one that signs what this client is given."""
    msg = services.ask(name, "RRSIG")
    assert msg.rcode() == dns.rcode.NOERROR and not msg.authority
    assert {r.rdtype for r in msg.answer} == {RRSIG}
    assert {r.covers for r in msg.answer} == covered
    by_type = {r.covers: r for r in msg.answer}
    for rdtype in covered - {NSEC}:
        positive = services.ask(name, dns.rdatatype.to_text(rdtype))
        [sigs] = [r for r in positive.answer if r.rdtype == RRSIG and r.covers == rdtype]
        assert by_type[rdtype] == sigs
    nsec = services.ask(name, "NSEC")
    [nsec_sigs] = [r for r in nsec.answer if r.rdtype == RRSIG]
    assert by_type[NSEC] == nsec_sigs


@pytest.mark.parametrize("rtype", ["NSEC", "RRSIG"])
def test_a_meta_question_at_a_nonexistent_name_gets_nxdomain_from_the_chain(world: World, rtype: str) -> None:
    """No NSEC may be owned by the name asked (it would list the type it denies): the chain's NXDOMAIN,
    its links signed already (nothing signed for it, whatever the budget)."""
    made = world.table.signer.signatures_made if world.table.signer else 0
    name = dns.name.from_text(f"nowhere-{rtype.lower()}.{ORIGIN}")
    msg = ask(world.responder, query(name.to_text(), rtype, dnssec_ok=True))
    assert msg.rcode() == dns.rcode.NXDOMAIN and not msg.answer
    links = [r for r in msg.authority if r.rdtype == NSEC]
    owners = [r.name for r in links]
    assert owners and name not in owners
    assert any(r.name < name < r[0].next for r in links)  # one covers the name
    assert world.validate(msg) == 1 + len(owners)
    assert world.table.signer is not None and world.table.signer.signatures_made == made


@pytest.mark.parametrize("rtype", ["NSEC", "RRSIG"])
def test_a_name_that_answers_nxdomain_gets_the_nsec_its_denial_carries(world: World, rtype: str) -> None:
    """`nx` (all_down: nxdomain, every endpoint down) denies itself with NXNAME: an NSEC question gets
    that same NSEC, an RRSIG question its RRSIG (never an NSEC without NXNAME beside the denial)."""
    name = f"nx.{ORIGIN}"
    denial = ask(world.responder, query(name, "A", dnssec_ok=True))
    nsec = nsec_of(denial)
    assert NXNAME in bitmap_types(nsec)
    msg = ask(world.responder, query(name, rtype, dnssec_ok=True))
    assert msg.rcode() == dns.rcode.NOERROR and not msg.authority
    [sigs] = [r for r in denial.authority if r.rdtype == RRSIG and r.covers == NSEC]
    assert msg.answer == ([nsec, sigs] if rtype == "NSEC" else [sigs])


def test_meta_questions_without_do_are_answered_as_before(services: Services) -> None:
    wire = query(f"web.{SERVICES_ZONE}", "NSEC", edns=0)
    msg = ask(services.responder, wire)
    assert msg.rcode() == dns.rcode.NOERROR and not msg.answer
    assert [r.rdtype for r in msg.authority] == [dns.rdatatype.SOA]


def test_any_still_gets_one_rrset_as_rfc_8482_says(services: Services) -> None:
    msg = services.ask("web", "ANY")
    assert msg.rcode() == dns.rcode.NOERROR
    assert len({r.rdtype for r in msg.answer if r.rdtype != RRSIG}) == 1


@pytest.mark.parametrize(
    ("name", "rtype"),
    [
        ("web", "NSEC"),
        ("web", "RRSIG"),
        ("x.apps", "TXT"),
        ("x.apps", "NSEC"),
        ("nothing", "NSEC"),
        ("", "RRSIG"),
    ],
)
@pytest.mark.parametrize("native", [True, False])
def test_c_and_the_python_fast_path_hand_these_questions_to_the_slow_path(
    services: Services, name: str, rtype: str, native: bool
) -> None:
    if native and not ctable.AVAILABLE:
        pytest.skip("no C extension")
    responder = Responder(services.table, services.view, random.Random(3), native=native)
    wire = query(f"{name}.{SERVICES_ZONE}" if name else SERVICES_ZONE, rtype, dnssec_ok=True)
    ip, v6 = client("203.0.113.5")
    if native:
        assert responder.native is not None and responder.native.native.answer(wire, ip, v6, False) is None
    got = responder.handle(wire, ip, v6)
    assert responder.slow_count == 1
    expected = slow_response(
        wire,
        services.view,
        ip,
        v6,
        tcp=False,
        max_udp_payload=services.table.max_udp_payload,
        use_client_subnet=services.table.use_client_subnet,
        rng=random.Random(3),
        seq=0,
        signer=services.table.signer,
        signed_zones=services.table.signed_zones,
    )
    assert got == expected


LABELS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_every_path_gives_the_same_bytes_for_wildcard_and_meta_type_questions(
    services: Services, data: st.DataObject
) -> None:
    """Random names (of the zone, below `*.apps`, below other names, nonexistent) asked for NSEC,
    RRSIG or a type a wildcard-made name lacks, with DO (and CO): the responder (C first, when built)
    leaves them to the slow path, whose bytes it sends as they are."""
    pool = sorted(n for n in services.view.names if n.endswith(SERVICES_ZONE))
    parents = st.sampled_from([*pool, f"apps.{SERVICES_ZONE}"])
    below = st.tuples(st.lists(LABELS, min_size=1, max_size=2), parents).map(
        lambda t: ".".join([*t[0], t[1]])
    )
    rtype = data.draw(st.sampled_from(["NSEC", "RRSIG", "TXT"]), "rtype")
    if rtype == "TXT":  # a type the wildcard lacks, at a name it makes
        name = data.draw(LABELS, "label") + f".apps.{SERVICES_ZONE}"
    else:
        name = data.draw(st.one_of(st.sampled_from(pool), below), "name")
    payload = data.draw(st.sampled_from([512, 1232, 4096]), "payload")
    wire = query(name, rtype, dnssec_ok=True, payload=payload)
    if data.draw(st.booleans(), "co"):
        wire = with_co(wire)
    native = ctable.AVAILABLE and data.draw(st.booleans(), "native")
    responder = Responder(services.table, services.view, random.Random(3), native=native)
    ip, v6 = client("203.0.113.5")
    seq = next_count(services.table, wire)  # the entry's counter: the table is shared by the examples
    got = responder.handle(wire, ip, v6)
    assert responder.slow_count == 1
    assert got == slow_response(
        wire,
        services.view,
        ip,
        v6,
        tcp=False,
        max_udp_payload=services.table.max_udp_payload,
        use_client_subnet=services.table.use_client_subnet,
        rng=random.Random(3),
        seq=seq,
        signer=services.table.signer,
        signed_zones=services.table.signed_zones,
    )
    msg = dns.message.from_wire(got or b"")
    assert msg.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN)
    nsecs = [r for r in (*msg.answer, *msg.authority) if r.rdtype == NSEC]
    if msg.rcode() == dns.rcode.NXDOMAIN:  # from the chain: no NSEC at the name asked
        assert all(r.name != dns.name.from_text(name) for r in nsecs)
    elif rtype == "TXT":  # NODATA proved at the name, never its denial
        assert not msg.answer and nsecs and NXNAME not in bitmap_types(nsecs[0])
    elif not msg.flags & dns.flags.TC:
        assert msg.answer and not msg.authority  # the records at the name


def test_an_rrsig_answer_has_the_ecs_scope_of_the_rrsets_it_signs(world: World) -> None:
    """The RRSIGs of a location-dependent answer depend on the client's location too (ECS scope = its
    source prefix, RFC 7871); the NSEC at the name does not (scope 0)."""

    def scope(rtype: str) -> int:
        wire = query(f"sticky.{ORIGIN}", rtype, dnssec_ok=True, ecs="198.51.100.0/24")
        [option] = [o for o in ask(world.responder, wire).options if isinstance(o, dns.edns.ECSOption)]
        return int(option.scopelen)

    assert scope("A") == 24  # a hash policy: picked per client
    assert scope("RRSIG") == 24
    assert scope("NSEC") == 0
