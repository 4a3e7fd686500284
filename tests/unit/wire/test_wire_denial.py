"""Denial past the signing budget (wire/denial.py): the NSEC chain is in canonical order, its links
cover the name and the wildcard at the closest encloser, the budget switches between compact denial and
the chain with the clock, both paths answer alike, and the chain follows the name set, not health."""

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
from test_wire_dnssec import NXNAME, World, bitmap_types, signed_config, slow
from wire_support import ORIGIN, SERVICES, ask, ask_wire, make_snapshot, query, svc

from gslbd.clock import FakeClock
from gslbd.model.dnssec import Dnssec
from gslbd.state.snapshot import Snapshot
from gslbd.wire.denial import NsecChain, build_chain, key_wire, name_key
from gslbd.wire.dnssec import CO, DenialBudget, Signer

ZONE = dns.name.from_text(ORIGIN)
NSEC = dns.rdatatype.NSEC


# --- the chain alone (a real signer; the names are made up) ---------------------------------------

TRICKY = [
    "a",
    "A.b",
    "z",
    "*",
    "-",
    "_x",
    "a.b",
    "z.a.b",
    "yljkjljk.a",
    "Z.a",
    "zABC.a",
    "*.z",
    "b.z",
    "0",
    "\\001.z",
]


def chain_of(labels: list[str], tmp: Path) -> tuple[NsecChain, Signer]:
    config = signed_config(tmp, 15, False)
    settings = config.zones[0].dnssec
    assert isinstance(settings, Dnssec)
    signer = Signer({ORIGIN: settings}, FakeClock().wall)
    names = {(): (6, 2)} | {
        name_key(dns.name.from_text(f"{x}.{ORIGIN}").canonicalize().to_text(), ORIGIN): (1,) for x in labels
    }
    return build_chain(signer, signer.zones[ORIGIN], 60, names), signer


def owner(chain: NsecChain, i: int) -> dns.name.Name:
    return dns.name.from_wire(chain.links[i].owner, 0)[0]


def next_name(chain: NsecChain, i: int) -> dns.name.Name:
    return dns.name.from_wire(chain.links[i].rdata, 0)[0]


def covers(chain: NsecChain, i: int, name: dns.name.Name) -> bool:
    """RFC 4034: owner < name < next, or the last link (next is the apex) and owner < name."""
    start, end = owner(chain, i), next_name(chain, i)
    return start < name and (name < end or end == ZONE)


def test_the_chain_is_in_canonical_order_and_closes_at_the_apex(tmp_path: Path) -> None:
    chain, _ = chain_of(TRICKY, tmp_path)
    owners = [owner(chain, i) for i in range(len(chain.links))]
    assert owners == sorted(owners)  # dnspython's Name order is RFC 4034 6.1 canonical order
    assert owners[0] == ZONE and next_name(chain, len(owners) - 1) == ZONE
    assert [next_name(chain, i) for i in range(len(owners) - 1)] == owners[1:]
    assert chain.flat == sorted(chain.flat) and chain.keys == sorted(chain.keys)


def closest_encloser(chain: NsecChain, name: dns.name.Name) -> dns.name.Name:
    """The longest ancestor of `name` that exists: a name of the chain or one above a name of it."""
    existing = set()
    for i in range(len(chain.links)):
        n = owner(chain, i)
        while n != ZONE:
            existing.add(n)
            n = n.parent()
    candidate = name.parent()
    while candidate != ZONE and candidate not in existing:
        candidate = candidate.parent()
    return candidate


@pytest.mark.parametrize("labels", [TRICKY, [x for x in TRICKY if x != "*"]], ids=["apex-wildcard", "plain"])
def test_cover_finds_the_covering_link_and_the_one_covering_the_wildcard(
    labels: list[str], tmp_path: Path
) -> None:
    chain, _ = chain_of(labels, tmp_path)
    rng = random.Random(11)
    alphabet = "ab-z0_*"
    asked = [
        "b",
        "aa.b",
        "x.a.b",
        "q.z.a.b",
        "zzz.a",
        "c.b.z",
        "a.b.c.d",
        "y.a.b",
        "\\000.a",
        "a\\000",
        "\\255",
    ]
    asked += [
        ".".join(
            "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))
        )
        for _ in range(400)
    ]
    existing = {owner(chain, i) for i in range(len(chain.links))}
    checked = 0
    for text in asked:
        name = dns.name.from_text(f"{text}.{ORIGIN}").canonicalize()
        ce = closest_encloser(chain, name)
        wildcard = dns.name.from_text("*", ce)
        found = chain.cover(name.to_wire() or b"")
        if name in existing or any(n.is_subdomain(name) for n in existing) or wildcard in existing:
            assert found is None, text  # it exists (or a wildcard answers): nothing to deny
            continue
        assert found is not None, text
        i, j = found
        assert covers(chain, i, name), text
        assert covers(chain, j, wildcard), (text, ce)
        checked += 1
    assert checked >= 40  # most names below a wildcard at the apex are not denied: it answers them


def test_a_name_below_an_empty_non_terminal_has_it_as_closest_encloser(tmp_path: Path) -> None:
    chain, _ = chain_of(["x.ent", "zz"], tmp_path)  # ent.<zone> is an empty non-terminal
    name = dns.name.from_text(f"a.ent.{ORIGIN}")
    found = chain.cover(name.to_wire() or b"")
    assert found is not None
    i, j = found
    assert owner(chain, i) == ZONE  # the apex's NSEC covers a.ent (before x.ent)...
    assert covers(chain, j, dns.name.from_text(f"*.ent.{ORIGIN}"))  # ...and *.ent, not *.<zone>
    assert next_name(chain, j) == dns.name.from_text(f"x.ent.{ORIGIN}")


def test_a_changed_name_signs_only_its_link_and_its_predecessors(tmp_path: Path) -> None:
    chain, signer = chain_of(["a", "c", "e"], tmp_path)
    before = signer.signatures_made
    same = chain.updated(signer, signer.zones[ORIGIN], {name_key(f"a.{ORIGIN}", ORIGIN): (1,)})
    assert same is chain and signer.signatures_made == before
    added = chain.updated(signer, signer.zones[ORIGIN], {name_key(f"b.{ORIGIN}", ORIGIN): (1, 28)})
    assert signer.signatures_made == before + 2  # a -> b and b -> c (one key)
    assert [key_wire(k, chain.origin) for k in added.keys] == [link.owner for link in added.links]
    assert [owner(added, i).to_text() for i in range(len(added.links))] == [
        ORIGIN,
        f"a.{ORIGIN}",
        f"b.{ORIGIN}",
        f"c.{ORIGIN}",
        f"e.{ORIGIN}",
    ]
    removed = added.updated(signer, signer.zones[ORIGIN], {name_key(f"e.{ORIGIN}", ORIGIN): None})
    assert next_name(removed, len(removed.links) - 1) == ZONE
    assert signer.signatures_made == before + 3  # c -> apex


# --- the budget ----------------------------------------------------------------------------------


def test_the_budget_gives_rate_signatures_a_second_and_saves_at_most_a_second() -> None:
    clock = FakeClock()
    budget = DenialBudget(2, clock.wall)
    assert [budget.take() for _ in range(3)] == [True, True, False]
    clock.advance(0.4)
    assert not budget.take()
    clock.advance(0.1)  # 0.5 s: one more
    assert [budget.take(), budget.take()] == [True, False]
    clock.advance(60)
    assert [budget.take() for _ in range(3)] == [True, True, False]  # a second's worth, no more
    never = DenialBudget(0, clock.wall)
    clock.advance(60)
    assert not never.take()


# --- answers ---------------------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path) -> World:
    config = signed_config(tmp_path, 13, True)
    zone = config.zones[0]
    assert zone.dnssec is not None
    return World(
        replace(
            config,
            zones=(replace(zone, dnssec=replace(zone.dnssec, denial_signing_rate=3)), *config.zones[1:]),
        )
    )


def chain_proof(world: World, msg: dns.message.Message, name: str, encloser: str = ORIGIN) -> None:
    """An RFC 4035 3.1.3.2 NXDOMAIN: signed SOA, an NSEC covering the name and one covering the
    wildcard at its closest encloser `encloser` (the same NSEC when it covers both), all validating."""
    assert msg.rcode() == dns.rcode.NXDOMAIN and not msg.answer and msg.flags & dns.flags.AA
    nsecs = [r for r in msg.authority if r.rdtype == NSEC]
    assert 1 <= len(nsecs) <= 2
    for nsec in nsecs:
        assert NXNAME not in bitmap_types(nsec)
        assert nsec.ttl == 60  # the negative TTL, as the SOA's

    def covered(target: dns.name.Name) -> bool:
        return any(n.name < target and (target < n[0].next or n[0].next == ZONE) for n in nsecs)

    assert covered(dns.name.from_text(name).canonicalize()), f"no NSEC covers {name}"
    assert covered(dns.name.from_text(f"*.{encloser}")), f"no NSEC covers *.{encloser}"
    assert world.validate(msg) == 1 + len(nsecs)


def test_past_the_budget_new_names_get_nxdomain_from_the_chain(world: World) -> None:
    for i in range(3):  # the budget: three fresh compact denials
        msg = ask(world.responder, query(f"fresh{i}.{ORIGIN}", "A", dnssec_ok=True))
        assert msg.rcode() == dns.rcode.NOERROR and NXNAME in bitmap_types(msg.authority[-2])
    signer = world.table.signer
    assert signer is not None
    before = signer.signatures_made
    for name, encloser in (
        (f"flood1.{ORIGIN}", ORIGIN),
        (f"FLOOD2.{ORIGIN}", ORIGIN),
        (f"x.y.app.{ORIGIN}", f"app.{ORIGIN}"),
        (f"q.app.{ORIGIN}", f"app.{ORIGIN}"),
        (f"zzz.deep.{ORIGIN}", f"deep.{ORIGIN}"),  # below an empty non-terminal
        (f"q.x.deep.{ORIGIN}", f"x.deep.{ORIGIN}"),
    ):
        msg = ask(world.responder, query(name, "A", dnssec_ok=True))
        chain_proof(world, msg, name, encloser)
    assert signer.signatures_made == before  # nothing signed on the query path
    # A name denied before keeps its compact denial (cached), whatever the budget.
    again = ask(world.responder, query(f"fresh1.{ORIGIN}", "A", dnssec_ok=True))
    assert again.rcode() == dns.rcode.NOERROR and NXNAME in bitmap_types(again.authority[-2])
    # A second later the budget has refilled: compact denials again.
    world.clock.advance(1)
    msg = ask(world.responder, query(f"later.{ORIGIN}", "A", dnssec_ok=True))
    assert msg.rcode() == dns.rcode.NOERROR and NXNAME in bitmap_types(msg.authority[-2])


def exhaust(world: World) -> None:
    for i in range(3):
        ask_wire(world.responder, query(f"spend{i}.{ORIGIN}", "A", dnssec_ok=True))


def test_nodata_and_positive_answers_do_not_change_past_the_budget(world: World) -> None:
    exhaust(world)
    msg = ask(world.responder, query(f"app.{ORIGIN}", "MX", dnssec_ok=True))
    assert msg.rcode() == dns.rcode.NOERROR and not msg.answer
    [nsec] = [r for r in msg.authority if r.rdtype == NSEC]
    assert nsec[0].next == dns.name.from_text(f"\\000.app.{ORIGIN}")
    assert bitmap_types(nsec) == {1, 28, dns.rdatatype.RRSIG, NSEC}
    assert ask(world.responder, query(f"app.{ORIGIN}", "A", dnssec_ok=True)).answer


def slow_message(world: World, wire: bytes) -> dns.message.Message:
    reply = slow(world, wire)
    assert reply is not None
    return dns.message.from_wire(reply)


def test_the_slow_path_answers_from_the_chain_like_the_fast_path(world: World) -> None:
    exhaust(world)
    for name in (f"flood.{ORIGIN}", f"a.b.deep.{ORIGIN}"):
        wire = query(name, "A", dnssec_ok=True)
        fast = ask(world.responder, wire)
        slow_reply = slow_message(world, wire)
        assert (fast.rcode(), fast.flags) == (slow_reply.rcode(), slow_reply.flags)
        assert fast.authority == slow_reply.authority
        chain_proof(world, slow_reply, name, ORIGIN if name.startswith("flood") else f"deep.{ORIGIN}")


def test_with_the_co_flag_a_chain_answer_is_nxdomain_without_co(world: World) -> None:
    wire = dns.message.from_wire(query(f"co.{ORIGIN}", "A", dnssec_ok=True))
    wire.use_edns(0, dns.flags.DO | CO, 1232)
    compact = ask(world.responder, wire.to_wire())  # within the budget: compact, CO echoed
    assert compact.rcode() == dns.rcode.NXDOMAIN and compact.ednsflags & CO
    exhaust(world)
    wire = dns.message.from_wire(query(f"co2.{ORIGIN}", "A", dnssec_ok=True))
    wire.use_edns(0, dns.flags.DO | CO, 1232)
    reply = ask(world.responder, wire.to_wire())
    chain_proof(world, reply, f"co2.{ORIGIN}")
    assert not reply.ednsflags & CO  # a traditional denial, not a compact answer


def test_a_health_change_keeps_the_chain_and_a_new_name_relinks_it(world: World) -> None:
    zone_key = dns.name.from_text(ORIGIN).to_wire() or b""
    chain = world.table.signed_zones[zone_key].denier.chain
    app = next(s for s in SERVICES if s.label == "app")
    health = dict(make_snapshot().health)
    health[app.endpoints[0].key] = False
    world.rebuild(Snapshot(version=2, health=health))
    assert not world.builder.last_full
    assert world.table.signed_zones[zone_key].denier.chain is chain
    # The bitmap lists the types a name answers in any health: app's AAAA stays when AAAA is down.
    link = chain.links[chain.flat.index(b"app\0")]
    assert {1, 28} <= set(link.types)


def test_a_new_service_is_a_new_link_after_a_reload(tmp_path: Path) -> None:
    config = signed_config(tmp_path, 13, True)
    world = World(config)
    world.config = replace(config, services=(*config.services, svc("newcomer", "192.0.2.99")))
    world.rebuild(make_snapshot())
    zone_key = dns.name.from_text(ORIGIN).to_wire() or b""
    chain = world.table.signed_zones[zone_key].denier.chain
    assert b"newcomer\0" in chain.flat
