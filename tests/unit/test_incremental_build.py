"""An answer builder that rebuilds only what a new snapshot changed answers exactly like a full build.

A seeded random walk over snapshots (verdicts, admin overrides, endpoints learned from peers, heartbeat
ticks) of a config with every kind of name (services, static records, locality names,
localtargets, heartbeats, empty non-terminals, hostname endpoints, all_down modes): after every step the
incremental table and view must hold the same names with the same answers as a table compiled from
scratch, and only the names of the services whose inputs changed may have been recompiled.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from types import MappingProxyType

import dns.message
import pytest

from gslbd.answer import View
from gslbd.answer.exchange_names import published
from gslbd.app.gauges import ServiceGauges
from gslbd.app.generation import Generation, GenerationBuilder, NewConfig, NewSnapshot, resolve
from gslbd.config import load_config_text
from gslbd.metrics import SERVICE_REGISTRY
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality
from gslbd.policy.locate import build_env
from gslbd.server.build import AnswerBuilder, compile_answers
from gslbd.state.book import HealthBook
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState, EndpointKind
from gslbd.wire import AnswerTable, Responder, wire_key
from gslbd.wire.compile import Entry, Node

ZONE = "gslb.test."

CONFIG = f"""\
site: {{name: eu, locality: {{region: europe, zone: europe-b}}}}
dns: {{listen: ["127.0.0.1:5353"]}}
zones:
  - origin: {ZONE}
    nameservers:
      - {{name: gslb-ns-eu-gslb.test., address: 127.0.0.2}}
      - {{name: gslb-ns-us-gslb.test., address: 127.0.0.3}}
    records:
      - {{name: info.deep, type: TXT, value: "static"}}
      - {{name: www, type: CNAME, value: app.{ZONE}}}
      - {{name: web-alias, type: CNAME, value: web.{ZONE}}}
sites:
  eu: {{locality: {{region: europe, zone: europe-b}}}}
  us: {{locality: {{region: america, zone: america-a}}}}
  ap: {{locality: {{region: asia}}}}
services:
  - name: app
    policy: failover
    failover_order: [eu, us]
    locality_names: true
    all_down: fallback
    fallback: [198.51.100.99]
    endpoints:
      - {{address: 192.0.2.1, site: eu}}
      - {{address: 192.0.2.2, site: eu, locality: {{region: europe, zone: europe-c}}}}
      - {{address: "2001:db8::1", site: eu}}
      - {{address: 198.51.100.1, site: us}}
  - name: web
    locality_names: true
    endpoints:
      - {{address: 192.0.2.3, site: eu}}
      - {{address: 192.0.2.4, site: eu, weight: 3}}
  - name: api.deep
    policy: weighted
    weights: {{eu: 70, us: 30}}
    all_down: nxdomain
    endpoints:
      - {{address: 192.0.2.5, site: eu}}
      - {{address: 192.0.2.6, site: eu}}
  - name: alias
    endpoints:
      - {{address: target.example.net.}}
      - {{address: 192.0.2.7}}
  - name: chase
    endpoints:
      - {{address: api.deep.{ZONE}}}
      - {{address: hashed.{ZONE}}}
  - name: hashed
    policy: hash
    all_down: servfail
    endpoints:
      - {{address: 192.0.2.8}}
      - {{address: 192.0.2.9}}
      - {{address: "2001:db8::9"}}
peers:
  sites:
    - {{name: us, nameservers: ["127.0.0.3:5353"]}}
    - {{name: ap, nameservers: ["127.0.0.4:5353"]}}
"""

PEER_ADDRESSES = {
    "us": ["198.51.100.10", "198.51.100.11", "2001:db8:1::10"],
    "ap": ["203.0.113.10", "203.0.113.11"],
}
PEER_LOCALITY = {
    "us": [Locality("america", "america-a"), Locality("america", "america-z")],
    "ap": [Locality("asia", None), Locality("asia", "asia-1")],
}


def config() -> Config:
    return load_config_text(CONFIG)


def learned(rng: random.Random, service: str) -> tuple[Endpoint, ...]:
    out = []
    for site, addresses in PEER_ADDRESSES.items():
        for address in addresses:
            if rng.random() < 0.5:
                kind = EndpointKind.IPV6 if ":" in address else EndpointKind.IPV4
                out.append(Endpoint(service, address, kind, site, rng.choice(PEER_LOCALITY[site])))
    return tuple(out)


def step(cfg: Config, book: HealthBook, rng: random.Random) -> None:
    """One random change to the book (sometimes a few at once, as a burst of verdicts gives)."""
    endpoints = [e for s in cfg.services for e in s.endpoints]
    for _ in range(rng.choice((1, 1, 1, 2, 4))):
        what = rng.random()
        if what < 0.45:
            e = rng.choice(endpoints)
            book.record(e.key, EndpointStatus(healthy=not book.status(e.key).healthy))
        elif what < 0.6:
            e = rng.choice(endpoints)
            book.set_admin(e.key, rng.choice(list(AdminState)))
        elif what < 0.8:
            service = rng.choice(cfg.services).name
            peers = dict(book.snapshot().peer_endpoints)
            found = learned(rng, service)
            if found:
                peers[service] = found
            else:
                peers.pop(service, None)
            book.set_peer_endpoints(peers)
        else:
            book.set_evaluated(book.evaluated_at + rng.choice((1.0, 2.5)))


def gauge_values(cfg: Config) -> dict[str, tuple[float | None, float | None]]:
    return {
        s.name: (
            SERVICE_REGISTRY.get_sample_value("gslbd_health_endpoints_up", {"service": s.name}),
            SERVICE_REGISTRY.get_sample_value("gslbd_health_endpoints", {"service": s.name}),
        )
        for s in cfg.services
    }


# The clock the automatic SOA serials are stamped with (app/serials.py), so that builds compare alike.
WALL = 1_700_000_000.0


def full_generation(cfg: Config, snapshot: Snapshot) -> Generation:
    return GenerationBuilder().first(resolve(cfg, random.Random(1), wall=WALL), snapshot)


def expected_gauges(full: Generation) -> dict[str, tuple[float | None, float | None]]:
    ServiceGauges().update(full)  # sets every service's gauges from scratch
    return gauge_values(full.config)


def picks(entry: Entry) -> list[int]:
    if entry.pick is None:
        return [0]
    rng = random.Random(5)
    clients = [(0x0A000001, False), (0xC0000201, False), (0x20010DB8 << 96, True)]
    return [entry.pick(ip, v6, rng, seq) for ip, v6 in clients for seq in range(3)]


def assert_same_node(mine: Node, node: Node, key: bytes) -> None:
    assert mine.types.keys() == node.types.keys(), key
    for entry_a, entry_b in [(mine.default, node.default)] + [
        (mine.types[t], node.types[t]) for t in node.types
    ]:
        assert entry_a.variants == entry_b.variants, key
        assert entry_a.location_dependent == entry_b.location_dependent, key
        assert picks(entry_a) == picks(entry_b), key


def assert_same_answers(incremental: AnswerTable, full: AnswerTable) -> None:
    assert incremental.names.keys() == full.names.keys()
    for key, node in full.names.items():
        assert_same_node(incremental.names[key], node, key)
    assert incremental.zones == full.zones
    assert incremental.policy_counters.keys() == full.policy_counters.keys()


@pytest.mark.parametrize("seed", range(8))
def test_incremental_generations_answer_and_count_like_full_builds_over_a_random_walk(seed: int) -> None:
    """The app's path: the book records changes, the generation builder revisits only the services the
    book says it touched; answers, counts, gauges and NOTIFY decisions equal a full build's."""
    rng = random.Random(seed)
    cfg = config()
    book = HealthBook()
    book.set_evaluated(1_700_000_000.0)
    builder = GenerationBuilder()
    generation = builder.first(resolve(cfg, random.Random(1), wall=WALL), book.snapshot())
    book.take_touched()
    gauges = ServiceGauges()
    gauges.update(generation)
    for _ in range(60):
        step(cfg, book, rng)
        before = generation
        generation = builder.next(before, NewSnapshot(book.snapshot(), book.take_touched()))
        assert generation.changed is not None  # incremental, never a full build
        snapshot = generation.snapshot
        full = full_generation(cfg, snapshot)
        assert generation.view.names.keys() == full.view.names.keys()
        assert generation.view.snapshot is snapshot
        assert_same_answers(generation.table, full.table)
        # What the app derives from the change (NOTIFY decisions, counts, gauges) matches a full pass.
        assert generation.publication == published(cfg, snapshot)
        expected_zones = [
            z
            for z in {*before.publication, *full.publication}
            if before.publication.get(z) != full.publication.get(z)
        ]
        assert sorted(generation.notify_zones) == sorted(expected_zones)
        assert dict(generation.counts) == dict(full.counts)
        gauges.update(generation)
        mine = gauge_values(cfg)
        assert mine == expected_gauges(full)
        # Nodes of names whose answers did not change are shared, not recompiled.
        table = generation.table
        shared = sum(before.table.names.get(key) is node for key, node in table.names.items())
        assert shared >= len(table.names) - 40


def test_an_admin_forced_down_peer_endpoint_counts_nowhere() -> None:
    """One rule: an endpoint learned from a peer and forced down by an admin is neither answered nor
    counted up by the gauges or the API's counts."""
    cfg = config()
    book = HealthBook()
    service = cfg.services[0].name
    peer = Endpoint(service, "203.0.113.50", EndpointKind.IPV4, "us", Locality("america", "america-a"))
    book.set_peer_endpoints({service: (peer,)})
    builder = GenerationBuilder()
    generation = builder.first(resolve(cfg, random.Random(1), wall=WALL), book.snapshot())
    assert "203.0.113.50" in generation.counts[service].up_addresses
    book.set_admin(peer.key, AdminState.DOWN)
    generation = builder.next(generation, NewSnapshot(book.snapshot(), book.take_touched()))
    count = generation.counts[service]
    assert "203.0.113.50" not in count.up_addresses
    answer = generation.view.resolve(service, "A", 0, False, random.Random(1), 0)
    assert "203.0.113.50" not in [rr.rdata for rr in answer.answer]
    ServiceGauges().update(generation)
    assert SERVICE_REGISTRY.get_sample_value("gslbd_health_endpoints_up", {"service": service}) == count.up


def web_goes_down() -> tuple[tuple[View, AnswerTable], tuple[View, AnswerTable]]:
    """A builder's first (view, table), and the pair after the first endpoint of web went down."""
    cfg = config()
    env = build_env(cfg, random.Random(1))
    builder = AnswerBuilder()
    first = builder.build(cfg, Snapshot(evaluated_at=1.0), env)
    web = next(s for s in cfg.services if s.name == f"web.{ZONE}")
    down = Snapshot(2, MappingProxyType({web.endpoints[0].key: False}), evaluated_at=1.0)
    return first, builder.build(cfg, down, env)


def test_a_verdict_recompiles_only_the_names_of_its_service() -> None:
    (view, table), (view2, table2) = web_goes_down()
    recompiled = {view2.names[n].name for n in view2.names if view.names.get(n) is not view2.names[n]}
    assert recompiled == {
        f"web.{ZONE}",
        f"web-alias.{ZONE}",  # its CNAME chain passes through web (answer/chain.py)
        f"localtargets-web.{ZONE}",
        f"web.europe.{ZONE}",
        f"web.europe-b.europe.{ZONE}",
        f"web.america.{ZONE}",
        f"web.america-a.america.{ZONE}",
        f"web.asia.{ZONE}",
    }
    changed = {key for key, node in table2.names.items() if table.names.get(key) is not node}
    assert len(changed) == len(recompiled)
    # The answer changed: only the healthy endpoint is left.
    a = view2.resolve(f"web.{ZONE}", "A", 0, False, random.Random(1), 0)
    assert [rr.rdata for rr in a.answer] == ["192.0.2.4"]


def counted(responder: Responder) -> dict[str, int]:
    return {policy: n for policy, n in responder.policy_answers().items() if n}


def test_policy_counts_survive_incremental_swaps_and_count_each_answer_once() -> None:
    (view, table), (view2, table2) = web_goes_down()
    responder = Responder(table, view, random.Random(1))

    def ask(name: str) -> None:
        responder.handle(dns.message.make_query(name, "A").to_wire(), 1, False)

    for _ in range(3):
        ask(f"web.{ZONE}")
        ask(f"hashed.{ZONE}")
    responder.swap(table2, view2)  # web's entries retire (3 answers), hashed's carry on
    ask(f"web.{ZONE}")
    ask(f"hashed.{ZONE}")
    assert counted(responder) == {"round_robin": 4, "hash": 4}
    cfg = view2.config
    view3, table3 = compile_answers(cfg, view2.snapshot, build_env(cfg, random.Random(1)))
    responder.swap(table3, view3)  # a full rebuild retires everything
    assert counted(responder) == {"round_robin": 4, "hash": 4}


def edit_services(cfg: Config, rng: random.Random, serial: int) -> Config:
    """One config reload's worth of service edits: an address, a policy or a TTL changed, a service
    added or removed (the services file case: the rest of the config stays as it was)."""
    services = list(cfg.services)
    what = rng.random()
    if what < 0.4:  # an endpoint moves to another address
        i = rng.randrange(len(services))
        s = services[i]
        ips = [j for j, e in enumerate(s.endpoints) if e.kind is EndpointKind.IPV4]
        if ips:
            j = rng.choice(ips)
            moved = replace(s.endpoints[j], address=f"203.0.113.{serial % 250 + 1}")
            services[i] = replace(s, endpoints=(*s.endpoints[:j], moved, *s.endpoints[j + 1 :]))
    elif what < 0.55:
        i = rng.randrange(len(services))
        services[i] = replace(services[i], ttl=services[i].ttl + 1)
    elif what < 0.8:  # a new service
        name = f"new{serial}.{ZONE}"
        site = cfg.site.name
        endpoint = Endpoint(
            name, f"192.0.2.{100 + serial % 100}", EndpointKind.IPV4, site, Locality("europe")
        )
        services.append(Service(name=name, zone=ZONE, label=f"new{serial}", endpoints=(endpoint,)))
    else:  # a service goes (one the static CNAMEs do not point at)
        removable = [i for i, s in enumerate(services) if s.name.startswith("new")]
        if removable:
            del services[rng.choice(removable)]
    return replace(cfg, services=tuple(services))


@pytest.mark.parametrize("seed", range(6))
def test_a_reload_that_changes_services_rebuilds_only_those_and_answers_like_a_full_build(seed: int) -> None:
    """Reloads that differ only in services (config/service_file.py's case), mixed with verdicts: the
    generation builder rebuilds the changed, added and removed services alone, and the answers, counts
    and publication equal a full build of the same config and snapshot."""
    rng = random.Random(seed)
    cfg = config()
    book = HealthBook()
    book.set_evaluated(1_700_000_000.0)
    builder = GenerationBuilder()
    generation = builder.first(resolve(cfg, random.Random(1), wall=WALL), book.snapshot())
    book.take_touched()
    for serial in range(40):
        step(cfg, book, rng)  # verdicts pending when the reload comes: they must not be lost
        before = generation
        cfg = edit_services(cfg, rng, serial)
        resolved = resolve(cfg, random.Random(1), before.resolved)
        assert resolved.env is before.env
        generation = builder.next(before, NewConfig(resolved, book.snapshot(), book.pending()))
        book.take_touched()
        assert generation.changed is not None  # incremental, not a full build
        full = full_generation(cfg, generation.snapshot)
        assert generation.view.names.keys() == full.view.names.keys()
        assert_same_answers(generation.table, full.table)
        assert generation.publication == published(cfg, generation.snapshot)
        assert dict(generation.counts) == dict(full.counts)
        shared = sum(before.table.names.get(key) is node for key, node in generation.table.names.items())
        assert shared >= len(generation.table.names) - 40


def test_a_reload_that_changes_more_than_services_builds_everything() -> None:
    cfg = config()
    builder = GenerationBuilder()
    first = builder.first(resolve(cfg, random.Random(1), wall=WALL), Snapshot())
    other = replace(cfg, dns=replace(cfg.dns, max_udp_payload=1400))
    resolved = resolve(other, random.Random(1), first.resolved)
    assert resolved.env is not first.env
    generation = builder.next(first, NewConfig(resolved, Snapshot(), frozenset()))
    assert generation.changed is None


def fresh(table: AnswerTable, name: str) -> AnswerTable:
    """`table` with the node of `name` counting its answers from 0 again (each entry on its own)."""
    key = wire_key(name)
    node = table.names.get(key)
    if node is None:
        return table

    def anew(entry: Entry) -> Entry:
        return entry._replace(counter=itertools.count())

    again = Node({t: anew(e) for t, e in node.types.items()}, anew(node.default))
    return replace(table, names=table.names.evolve({key: again}))


def ask_each(generation: Generation, names: list[str], native: bool) -> list[bytes | None]:
    """Every name asked A, AAAA and TXT, each from a fresh responder and node (the same first pick and
    the same draws, whether the fast path or the slow path answers)."""
    out = []
    for name in names:
        for rtype in ("A", "AAAA", "TXT"):
            query = dns.message.make_query(name, rtype, use_edns=0)
            query.id = 7
            table = fresh(generation.table, name)
            responder = Responder(table, generation.view, random.Random(3), native=native)
            out.append(responder.handle(query.to_wire(), 0x0A000001, False))
    return out


def shapes(responder: Responder, names: list[str]) -> list[tuple[int, bool]]:
    """Each name's rcode for A and AAAA, and whether it answers with records: what a long-lived
    responder answers whatever its counters have reached (which record a policy picks may differ)."""
    out = []
    for name in names:
        for rtype in ("A", "AAAA"):
            wire = responder.handle(dns.message.make_query(name, rtype).to_wire(), 0x0A000001, False)
            assert wire is not None
            reply = dns.message.from_wire(wire)
            out.append((reply.rcode(), bool(reply.answer)))
    return out


def assert_compiled_subset(partial: AnswerTable, full: AnswerTable) -> None:
    """Every node `partial` has is the full table's node (by answers)."""
    assert partial.names.keys() <= full.names.keys()
    for key, node in partial.names.items():
        assert_same_node(node, full.names[key], key)
    assert partial.policy_counters.keys() <= full.policy_counters.keys()


def many_services() -> str:
    """CONFIG with 40 more services, most of them of the shape a view defers (answer/build.py
    Deferred): plain ones, ones below an empty non-terminal, two below other services (one built at
    once, one deferred), one a static CNAME points at and one a hostname endpoint points at."""
    lines = []
    # Not `random` or `weighted` between sites: C draws from its own source (the answers differ).
    policies = ("round_robin", "failover", "hash")
    for i in range(30):
        policy = policies[i % len(policies)]
        extra = ""
        if policy == "failover":
            extra = ", failover_order: [us, eu]"
        all_down = ("serve_all", "nxdomain", "servfail")[i % 3]
        lines.append(
            f"  - {{name: s{i}, policy: {policy}{extra}, all_down: {all_down}, endpoints: ["
            f"{{address: 192.0.2.{10 + i}, site: eu}}, {{address: 192.0.2.{50 + i}, site: eu}}, "
            f'{{address: "2001:db8::{i:x}", site: eu}}, {{address: 198.51.100.{10 + i}, site: us}}]}}'
        )
    for i in range(6):
        lines.append(f"  - {{name: d{i}.deep2, endpoints: [{{address: 192.0.2.{100 + i}, site: eu}}]}}")
    lines.append("  - {name: x.s5, locality_names: true, endpoints: [{address: 192.0.2.120, site: eu}]}")
    lines.append("  - {name: y.s6, endpoints: [{address: 192.0.2.121, site: eu}]}")
    lines.append(f"  - {{name: hop, endpoints: [{{address: s13.{ZONE}}}]}}")
    services = "\n".join(lines)
    text = CONFIG.replace(
        f"      - {{name: web-alias, type: CNAME, value: web.{ZONE}}}\n",
        f"      - {{name: web-alias, type: CNAME, value: web.{ZONE}}}\n"
        f"      - {{name: www2, type: CNAME, value: s11.{ZONE}}}\n",
    )
    return text.replace("services:\n", f"services:\n{services}\n", 1)


@pytest.mark.parametrize("kind", ["service", "localtargets", "two labels down"])
def test_the_next_fill_step_compiles_the_names_clients_asked_for_first(kind: str) -> None:
    """Past a large start, a name not compiled yet is answered by the slow path; the responder keeps
    the names it was asked for (Responder.take_wanted) and the next fill step builds their services and
    compiles them before any other, so a name clients use leaves the slow path at once."""
    cfg = load_config_text(many_services())

    def started() -> tuple[GenerationBuilder, Generation]:
        builder = GenerationBuilder(eager_names=20)
        return builder, builder.first(resolve(cfg, random.Random(1), wall=WALL), HealthBook().snapshot())

    # A deferred service that a step without asked-for names would not build (the fill's own order).
    other, first = started()
    plain = other.fill(first, 0.0, most=1)
    assert plain is not None and first.view.deferred is not None
    later = sorted(n for n in first.view.deferred.services if wire_key(n) not in plain.table.names)
    service = next(n for n in later if n.startswith("d" if kind == "two labels down" else "s"))
    name = f"localtargets-{service}" if kind == "localtargets" else service

    builder, generation = started()
    responder = Responder(generation.table, generation.view, random.Random(3))  # C first, where built
    assert wire_key(name) not in generation.table.names
    before = responder.slow_count
    assert responder.handle(dns.message.make_query(name, "A").to_wire(), 0x0A000001, False) is not None
    assert responder.slow_count == before + 1
    wanted = responder.take_wanted()
    assert wanted == [name] and responder.take_wanted() == []  # taken once
    filled = builder.fill(generation, 0.0, most=1, wanted=[f"nothing.{ZONE}", *wanted])
    assert filled is not None and wire_key(name) in filled.table.names
    responder.swap(filled.table, filled.view)
    responder.handle(dns.message.make_query(name, "A").to_wire(), 0x0A000001, False)
    if responder.native is not None:
        assert responder.slow_count == before + 1  # answered by the C table now
    else:
        assert responder.slow_count == before + 2  # without C the slow path answers everything


@pytest.mark.parametrize("seed", range(2))
def test_a_view_built_in_steps_answers_like_a_whole_one_through_verdicts_and_reloads(seed: int) -> None:
    """A large view's first build defers most services (answer/build.py Deferred) and its first table
    leaves the names of the services it did build out (server/build.py): the fast paths (C and Python)
    send what they do not hold to the slow path, which makes a deferred service's names when they are
    asked for, and fill steps build them into the view and compile the names into the table.
    Fill steps (given the names the slow path was asked for, and others, to compile first), verdicts,
    peers' endpoints and service reloads (changed, added and removed services, deferred or not)
    interleave at random: every answer, at every name of a whole build and
    at names that do not exist, equals a whole build's all along, and once filled the view and the
    table equal a whole build's."""
    rng = random.Random(seed)
    cfg = load_config_text(many_services())
    book = HealthBook()
    book.set_evaluated(1_700_000_000.0)
    builder = GenerationBuilder(eager_names=20)
    generation = builder.first(resolve(cfg, random.Random(1), wall=WALL), book.snapshot())
    book.take_touched()
    deferred = generation.view.deferred
    assert deferred is not None and generation.table.partial
    held = {f"s11.{ZONE}", f"s13.{ZONE}", f"s5.{ZONE}"}  # CNAME targets; a built name below s5
    assert not held & set(deferred.services.keys())  # type: ignore[attr-defined]
    live = Responder(generation.table, generation.view, random.Random(3))
    for serial in range(25):
        what = rng.random()
        if what < 0.4:
            # What clients asked the slow path for (the live responder is asked every name each step),
            # and a few names more: a service's, its localtargets name, a name of nothing.
            some = rng.choice(cfg.services).name
            wanted = [*live.take_wanted(), some, f"localtargets-{some}", f"nothing.{ZONE}"]
            rng.shuffle(wanted)
            filled = builder.fill(generation, 0.0, most=rng.choice((1, 3, 8)), wanted=wanted)
            if filled is None:
                assert not generation.table.partial
                continue
            assert filled.changed == frozenset()
            generation = filled
            live.swap(filled.table, filled.view, lag=True)
        elif what < 0.75:
            step(cfg, book, rng)
            generation = builder.next(generation, NewSnapshot(book.snapshot(), book.take_touched()))
        else:
            if rng.random() < 0.3:  # a plain service goes, deferred or not
                gone = rng.choice([s for s in cfg.services if s.name.startswith("s")])
                cfg = replace(cfg, services=tuple(s for s in cfg.services if s is not gone))
            else:
                cfg = edit_services(cfg, rng, serial)
            resolved = resolve(cfg, random.Random(1), generation.resolved)
            generation = builder.next(generation, NewConfig(resolved, book.snapshot(), book.pending()))
            book.take_touched()
        assert generation.changed is not None  # never a whole build again
        full = full_generation(cfg, generation.snapshot)
        assert full.view.deferred is None
        assert_compiled_subset(generation.table, full.table)
        names = sorted(full.view.names)
        names += [f"nothing.{ZONE}", f"q.s3.{ZONE}", f"localtargets-nothing.{ZONE}", "example.org."]
        for name in names:
            mine, whole = generation.view.get(name), full.view.get(name)
            assert (mine is None) == (whole is None), name
        assert {s.name: generation.count(s.name) for s in cfg.services} == dict(full.counts)
        assert generation.publication == full.publication
        # Byte by byte from fresh responders (and C copies): a sample of names each step.
        sample = rng.sample(names, 10) + names[-4:]
        assert ask_each(generation, sample, native=True) == ask_each(full, sample, native=False)
        if generation.table is not live.table:
            live.swap(generation.table, generation.view)
        assert shapes(live, names) == shapes(Responder(full.table, full.view, random.Random(3)), names)
    while (filled := builder.fill(generation, 1.0)) is not None:
        generation = filled
    assert generation.view.deferred is None and not generation.table.partial
    full = full_generation(cfg, generation.snapshot)
    assert generation.view.names.keys() == full.view.names.keys()
    assert dict(generation.counts) == dict(full.counts)  # every service counted once built
    assert_same_answers(generation.table, full.table)
