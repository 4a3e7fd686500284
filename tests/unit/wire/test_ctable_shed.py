"""shed_load answered by the C table (wire/_shed.c): for the same draw C writes the bytes the Python
ShedPlan answers, over every policy and any shed factors, with and without pools; over many queries
each endpoint is in the share of the answers its factor says; a load change recompiles and copies into
C only the touched service."""

from __future__ import annotations

import random
from dataclasses import replace

import dns.message
import dns.rdatatype
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pools_world import BY_NETWORK, BY_SITE, pools_of
from shed_world import SHED, SHED_SEEDS, V4, V6, load_state, shed_service, shed_services, shed_snapshot
from test_ctable import NETWORKS, SITES, VIEWS, layout_entries
from test_wire_fuzz import MUTATION, Mutation, mutate
from wire_support import CONFIG, ORIGIN, FixedDraw, entry_kind, left_to_python, oracle, query, well_formed

from gslbd.answer import View, build_view
from gslbd.clock import FakeClock
from gslbd.model.config import Config
from gslbd.model.service import Rule, Service
from gslbd.model.topology import Topology
from gslbd.policy.base import PolicyEnv
from gslbd.policy.load import ShedPlan, shed_factor
from gslbd.policy.locate import TopologyLocator
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.types import PolicyName
from gslbd.wire import compile_table
from gslbd.wire import ctable as ct
from gslbd.wire.compile import AnswerTable, wire_key

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

ENV = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
# (policy, uneven weights, site weights): hash with even weights is rendezvous, uneven weighted rendezvous
POLICIES = (
    (PolicyName.ROUND_ROBIN, True, None),
    (PolicyName.FAILOVER, True, None),
    (PolicyName.GEO, True, None),
    (PolicyName.HASH, False, None),
    (PolicyName.HASH, True, None),
    (PolicyName.RANDOM, True, None),
    (PolicyName.WEIGHTED, True, (("eu", 3), ("us", 1), ("ap", 2))),
)
# clients: eu, ap and us by topology networks, a network without a site, unmatched v4 and v6
CLIENTS = (
    (0x0A010203, False),
    (0x0A010305, False),
    (0x0A050505, False),
    (0xC0000201, False),
    (0xCB007105, False),
)
CLIENTS_V6 = ((0x20010DB8000100000000000000000001, True), (0x20010DB8FFFF00000000000000000001, True))
FIGURE = st.one_of(st.sampled_from([0.0, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 1.2]), st.floats(0.0, 1.2))


def table_of(services: tuple[Service, ...], snapshot: Snapshot) -> tuple[View, AnswerTable]:
    view = build_view(replace(CONFIG, services=services), snapshot, ENV)
    return view, compile_table(view, max_udp_payload=1232, use_client_subnet=True)


def python_and_c(
    view: View,
    table: AnswerTable,
    native: ct.CTable,
    wire: bytes,
    ip: int,
    v6: bool,
    draw: float,
    seq: int = 0,
) -> tuple[bytes | None, bytes | None]:
    """The slow path's answer and C's for the same choice (the count `seq`, the same draw); a client
    only Python places (pools rules on the address) is placed by each level that misses it, as the
    responder does (learn after each query C left to Python), a bounded number of times."""
    python = oracle(view, table, wire, ip, v6, seq=seq, rng=FixedDraw(draw))
    c = native.native.answer(wire, ip, v6, False, seq, draw)
    for _ in range(LEARN_LIMIT):
        if c is not None:
            break
        native.learn(wire)
        c = native.native.answer(wire, ip, v6, False, seq, draw)
    return python, c


LEARN_LIMIT = 16  # a level's pools, then its pool's geo plan, per shed level


def plan_of(table: AnswerTable, name: str, rtype: int) -> object:
    node = table.names[wire_key(name)]
    pick = node.types.get(rtype, node.default).pick
    return getattr(pick, "__self__", None)


@settings(max_examples=80, deadline=None)
@given(
    policy=st.sampled_from(POLICIES),
    figures=st.lists(FIGURE, min_size=1, max_size=8),
    draws=st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1, max_size=6),
    max_answers=st.sampled_from([1, 2, 8]),
    rules=st.sampled_from(((), BY_SITE, BY_NETWORK)),
    min_healthy=st.sampled_from((1, 2)),
)
def test_c_answers_shed_load_with_the_python_bytes_for_the_same_draw(
    policy: tuple[PolicyName, bool, tuple[tuple[str, int], ...] | None],
    figures: list[float],
    draws: list[float],
    max_answers: int,
    rules: tuple[Rule, ...],
    min_healthy: int,
) -> None:
    """`rules`: the service has pools (tests/unit/wire/pools_world.py), so each shed level is a pools
    plan over the level's candidates (rules per location, or on the address: learnt per level)."""
    name, uneven, weights = policy
    addresses = (*V4, *V6)[: len(figures)]
    service = shed_service(
        "s", name, addresses, ORIGIN, uneven=uneven, weights=weights, max_answers=max_answers
    )
    if rules:
        service = replace(service, pools=pools_of(min_healthy), rules=rules)
    loads = {e.endpoint_key: load_state(f) for e, f in zip(service.endpoints, figures, strict=True)}
    view, table = table_of((service,), Snapshot(loads=loads))
    native = ct.build_ctable(table)
    for rtype in ("A", "AAAA"):
        wire = query(service.name, rtype)
        if isinstance(plan_of(table, service.name, dns.rdatatype.from_text(rtype)), ShedPlan):
            assert entry_kind(table, wire) == ct.K_SHED
        for ip, v6 in (*CLIENTS, *CLIENTS_V6):
            for seq, draw in enumerate(draws):
                python, c = python_and_c(view, table, native, wire, ip, v6, draw, seq)
                assert c is not None and c == python


def test_when_every_candidate_is_above_high_all_stay_in_c_too() -> None:
    service = shed_service("s", PolicyName.ROUND_ROBIN, V4[:3], ORIGIN)
    view, table = table_of(
        (service,), Snapshot(loads={e.endpoint_key: load_state(0.9) for e in service.endpoints})
    )
    native = ct.build_ctable(table)
    wire = query(service.name)
    for draw in (0.0, 0.5, 0.99):
        python, c = python_and_c(view, table, native, wire, 1, False, draw)
        assert c is not None and c == python
        assert {str(r) for rrset in dns.message.from_wire(c).answer for r in rrset} == set(V4[:3])


def test_each_endpoint_is_in_the_share_of_c_answers_its_shed_factor_says() -> None:
    figures = (0.3, 0.65, 0.7, 0.75, 0.95)  # factors 1, 0.75, 0.5, 0.25 and out (above high)
    service = shed_service("s", PolicyName.ROUND_ROBIN, V4, ORIGIN)
    loads = {e.endpoint_key: load_state(f) for e, f in zip(service.endpoints, figures, strict=True)}
    _, table = table_of((service,), Snapshot(loads=loads))
    native = ct.build_ctable(table)
    native.native.seed(20261203)
    wire = query(service.name)
    queries = 20_000
    seen = dict.fromkeys(V4, 0)
    for _ in range(queries):
        out = native.native.answer(wire, 0x0A000001, False, False)  # C's own draws and counter
        assert out is not None
        for rrset in dns.message.from_wire(out).answer:
            for record in rrset:
                seen[str(record)] += 1
    for address, figure in zip(V4, figures, strict=True):
        expected = 0.0 if figure > SHED.high else shed_factor(figure, SHED)
        # binomial standard deviation at most 0.0036 at 20,000 queries: 0.02 is over 5 of them
        assert seen[address] / queries == pytest.approx(expected, abs=0.02), address
    assert native.policy_answers()["round_robin"] == queries


def test_a_load_change_recompiles_and_copies_into_c_only_the_touched_service() -> None:
    services = shed_services(ORIGIN)
    config: Config = replace(CONFIG, services=services)
    builder = AnswerBuilder(FakeClock())
    snapshot = shed_snapshot(services, Snapshot())
    _, table = builder.build(config, snapshot, ENV)
    native = ct.build_ctable(table)
    rr = next(s for s in services if s.label == "shed-rr")
    moved = {**snapshot.loads, rr.endpoints[0].endpoint_key: load_state(0.7)}  # 0.3 -> 0.7: factor 0.5
    view, changed = builder.build(config, replace(snapshot, loads=moved), ENV, touched=[rr.name])
    assert builder.last_change.services == frozenset({rr.name})
    assert builder.last_change.changed == frozenset({rr.name})
    updated = ct.update_ctable(native, changed)
    _, shards, *_ = native.native.layout()
    assert updated.native.shared_shards(native.native) == shards - 1  # one name's shard copied
    for service in services:
        wire = query(service.name)
        for draw in (0.1, 0.45, 0.55, 0.9):
            python, c = python_and_c(view, changed, updated, wire, 0x0A010203, False, draw)
            assert c is not None and c == python
    # 192.0.2.161 is now kept only by draws below its factor 0.5
    low = updated.native.answer(query(rr.name), 1, False, False, 0, 0.4)
    high = updated.native.answer(query(rr.name), 1, False, False, 0, 0.6)
    assert low is not None and high is not None
    assert b"\xc0\x00\x02\xa1" in low and b"\xc0\x00\x02\xa1" not in high


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, len(SHED_SEEDS) - 1),
    ops=st.lists(MUTATION, max_size=4),
    tcp=st.booleans(),
    draw=st.floats(0.0, 1.0, exclude_max=True),
    source=st.sampled_from((*CLIENTS, *CLIENTS_V6)),
)
# shed-geo asked with ECS 2001:db8:ffff::/48: a geo level (draw 0) and the location-independent last
# level (draw 0.75) both answer with the levels' scope, /33, in C as in Python
@example(seed=5, ops=[], tcp=False, draw=0.0, source=(167838211, False))
@example(seed=5, ops=[], tcp=False, draw=0.75, source=(167838211, False))
def test_mutated_queries_of_shed_services_get_the_python_answer_or_go_to_python(
    seed: int, ops: list[Mutation], tcp: bool, draw: float, source: tuple[int, bool]
) -> None:
    packet = mutate(SHED_SEEDS[seed], ops)
    table = compile_table(VIEWS["shed"], max_udp_payload=1232, use_client_subnet=True)
    ip, v6 = source
    python = oracle(VIEWS["shed"], table, packet, ip, v6, tcp, rng=FixedDraw(draw))
    c = ct.build_ctable(table).native.answer(packet, ip, v6, tcp, 0, draw)
    assert c == python or (c is None and (not well_formed(packet) or left_to_python(table, packet)))


def test_layout_counts_the_level_entries_a_shed_entry_holds() -> None:
    """`Table.layout()` counts a shed entry's levels as entries (each its own block in C) and as
    references: the C copy of the shed services holds one entry per level besides the shed entry."""
    services = shed_services(ORIGIN)
    _, table = table_of(services, shed_snapshot(services))
    distinct = {id(e): e for n in table.names.values() for e in n.types.values() if e.pick is not None}
    specs = [ct._entry_spec(e, 0, ct._Locators()) for e in distinct.values()]
    levels = sum(len(spec[4][1]) for spec in specs if spec[0] == ct.K_SHED)
    assert levels > len(services)  # several shed entries, each of more than one level
    _, _, _, _, entries, refs, entry_bytes, _ = ct.build_ctable(table).native.layout()
    assert entries == layout_entries(table)  # which counts the levels: without them `levels` fewer
    assert refs >= entries + levels - len(specs) and entry_bytes > 0
