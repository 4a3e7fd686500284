"""Pools whose plans draw, hash or are geo answered by the C table (wire/_pools.c): for the same seq and
draw C writes the bytes (and the ECS scope) the Python PoolPlan answers, for weighted, random, hash,
weighted hash and geo pools (with a bias), with and without shed_load over them (wire/_shed.c), rules
placed per location or per client prefix, clients in every location; over many queries a weighted
pool's endpoints get the shares their weights say."""

from __future__ import annotations

import random
from dataclasses import replace

import dns.message
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pools_world import (
    ADDRESSES,
    BY_NETWORK,
    BY_SITE,
    POLICIES,
    POOLS_SEEDS,
    pools_service,
    shed_figures,
    weight_of,
)
from test_ctable import NETWORKS, SITES, VIEWS, layout_entries
from test_wire_fuzz import MUTATION, Mutation, mutate
from wire_support import (
    CONFIG,
    ORIGIN,
    SERVICES,
    FixedDraw,
    entry_kind,
    left_to_python,
    make_snapshot,
    oracle,
    query,
    well_formed,
)

from gslbd.answer import View, build_view
from gslbd.model.service import Rule, Service
from gslbd.model.topology import Topology
from gslbd.policy.base import PolicyEnv
from gslbd.policy.locate import TopologyLocator
from gslbd.types import PolicyName
from gslbd.wire import compile_table
from gslbd.wire import ctable as ct
from gslbd.wire.compile import AnswerTable

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

ENV = PolicyEnv(TopologyLocator(Topology(networks=NETWORKS), SITES), SITES, random.Random(1))
# eu, ap, us and no-site topology networks, a network without a site, unmatched v4; eu and unmatched v6
CLIENTS = (
    (0x0A010005, False),
    (0x0A010207, False),
    (0x0A050505, False),
    (0x0A010309, False),
    (0xC0000201, False),
    (0xCB007105, False),
    (0x20010DB8000100000000000000000001, True),
    (0x20010DB8FFFF00000000000000000001, True),
)
ECS = (None, "10.1.0.0/16", "10.1.2.0/24", "10.5.0.0/16", "203.0.113.0/24", "2001:db8:1::/48")


def table_of(service: Service, use_client_subnet: bool = True) -> tuple[View, AnswerTable]:
    snapshot = make_snapshot()
    if service.shed_load is not None:
        snapshot = replace(snapshot, loads={**snapshot.loads, **shed_figures(service)})
    view = build_view(replace(CONFIG, services=(*SERVICES, service)), snapshot, ENV)
    return view, compile_table(view, max_udp_payload=1232, use_client_subnet=use_client_subnet)


# Python places a client at most once per geo or pools plan C nests: a shed level's pools, then the
# pool's geo plan (wire/_pools.c, the miss's path)
LEARN_LIMIT = 8


def c_answer(native: ct.CTable, wire: bytes, ip: int, v6: bool, seq: int, draw: float) -> bytes | None:
    """C's answer for the choice; a client only Python places is placed by each plan that misses it (as
    the responder does: learn after every query C left to Python)."""
    out = native.native.answer(wire, ip, v6, False, seq, draw)
    for _ in range(LEARN_LIMIT):
        if out is not None:
            break
        native.learn(wire)
        out = native.native.answer(wire, ip, v6, False, seq, draw)
    return out


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(POLICIES),
    rules=st.sampled_from((BY_SITE, BY_NETWORK)),
    min_healthy=st.sampled_from((1, 3)),
    rtype=st.sampled_from(("A", "AAAA")),
    ecs=st.sampled_from(ECS),
    draws=st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1, max_size=4),
    repeats=st.integers(1, 3),
    shed=st.booleans(),
)
# shed_load over hash pools, ECS 10.5.0.0/16: the scope is the hash's /24 capped at /16 (C wrote the
# location's /8, the pool plan's hash left out of the levels' scope)
@example(
    policy=(PolicyName.HASH, False),
    rules=BY_SITE,
    min_healthy=1,
    rtype="A",
    ecs="10.5.0.0/16",
    draws=[0.1],
    repeats=1,
    shed=True,
)
def test_c_answers_drawing_and_geo_pools_with_the_python_bytes_for_the_same_seq_and_draw(
    policy: tuple[PolicyName, bool],
    rules: tuple[Rule, ...],
    min_healthy: int,
    rtype: str,
    ecs: str | None,
    draws: list[float],
    repeats: int,
    shed: bool,
) -> None:
    """min_healthy 3 sends europe's clients down its fallback chain; the ECS scope is in the bytes;
    `shed`: shed_load over the pools (a shed entry whose levels are pools entries, or pools entries over
    the weights shed_load gives a weighted policy)."""
    view, table = table_of(pools_service(*policy, rules, min_healthy, shed=shed))
    native = ct.build_ctable(table)
    wire = query(f"pd.{ORIGIN}", rtype, edns=0, ecs=ecs)
    assert entry_kind(table, wire) in (ct.K_GEO, ct.K_SHED)  # answered by C, not left to Python
    for ip, v6 in CLIENTS:
        for draw in draws:
            for seq in range(repeats):  # seqs 0, 1, 2 ...: a rotation inside the variant would show
                python = oracle(view, table, wire, ip, v6, seq=seq, rng=FixedDraw(draw))
                assert python is not None
                assert c_answer(native, wire, ip, v6, seq, draw) == python


def test_geo_pools_and_shed_load_over_pools_are_c_entries() -> None:
    """policy: geo inside the pools is a pooled geo entry; shed_load over pools whose plans rotate,
    draw, hash or are geo a shed entry over them."""
    for name, uneven in POLICIES:
        for rules in (BY_SITE, BY_NETWORK):
            wire = query(f"pd.{ORIGIN}", edns=0)
            assert entry_kind(table_of(pools_service(name, uneven, rules, 1))[1], wire) == ct.K_GEO
            shed = entry_kind(table_of(pools_service(name, uneven, rules, 1, shed=True))[1], wire)
            # a weighted policy takes shed_load into its weights: no shed entry
            assert shed == (ct.K_GEO if name is PolicyName.WEIGHTED else ct.K_SHED)


def test_a_biased_geo_pool_answers_in_c_with_the_site_the_bias_grows() -> None:
    """An eu client of pool rest (us and ap, europe below min_healthy 3): us is nearer, but ap's bias
    +60 makes its biased distance shorter; C answers that from the first query, no Python."""
    wire = query(f"pd.{ORIGIN}", edns=0)
    answers = {}
    for uneven in (False, True):
        native = ct.build_ctable(table_of(pools_service(PolicyName.GEO, uneven, BY_SITE, 3))[1])
        out = native.native.answer(wire, 0x0A010005, False, False)
        assert out is not None
        answers[uneven] = {str(r) for rrset in dns.message.from_wire(out).answer for r in rrset}
    assert answers == {False: {"192.0.2.63", "192.0.2.64"}, True: {"192.0.2.65", "192.0.2.66"}}


def test_each_endpoint_of_a_weighted_pool_gets_its_weight_share_of_c_answers() -> None:
    _, table = table_of(pools_service(PolicyName.WEIGHTED, True, BY_SITE, 1))
    native = ct.build_ctable(table)
    native.native.seed(20261203)
    wire = query(f"pd.{ORIGIN}")
    queries = 20_000
    pools = {0x0A010005: ("192.0.2.61", "192.0.2.62"), 0x0A050505: ADDRESSES[2:]}
    weights = {a: weight_of(i, True) for i, a in enumerate(ADDRESSES)}
    for ip, members in pools.items():
        seen = dict.fromkeys(ADDRESSES, 0)
        for _ in range(queries):
            out = native.native.answer(wire, ip, False, False)  # C's own draws and counter
            assert out is not None
            for rrset in dns.message.from_wire(out).answer:
                for record in rrset:
                    seen[str(record)] += 1
        total = sum(weights[a] for a in members)
        for address in ADDRESSES:
            expected = weights[address] / total if address in members else 0.0
            # binomial standard deviation at most 0.0036 at 20,000 queries: 0.02 is over 5 of them
            assert seen[address] / queries == pytest.approx(expected, abs=0.02), address
    assert native.policy_answers()["weighted"] == 2 * queries


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, len(POOLS_SEEDS) - 1),
    ops=st.lists(MUTATION, max_size=4),
    tcp=st.booleans(),
    draw=st.floats(0.0, 1.0, exclude_max=True),
    source=st.sampled_from(CLIENTS),
)
def test_mutated_queries_of_pools_services_get_the_python_answer_or_go_to_python(
    seed: int, ops: list[Mutation], tcp: bool, draw: float, source: tuple[int, bool]
) -> None:
    packet = mutate(POOLS_SEEDS[seed], ops)
    table = compile_table(VIEWS["pools"], max_udp_payload=1232, use_client_subnet=True)
    ip, v6 = source
    python = oracle(VIEWS["pools"], table, packet, ip, v6, tcp, rng=FixedDraw(draw))
    c = ct.build_ctable(table).native.answer(packet, ip, v6, tcp, 0, draw)
    assert c == python or (c is None and (not well_formed(packet) or left_to_python(table, packet)))


def test_layout_counts_the_class_entries_a_drawing_pools_entry_holds() -> None:
    """`Table.layout()` counts a drawing pools entry's classes (one entry each, wire/_pools.c) as entries."""
    _, table = table_of(pools_service(PolicyName.WEIGHTED, True, BY_SITE, 1))
    pooled = [
        spec
        for node in table.names.values()
        for entry in node.types.values()
        if (spec := ct._entry_spec(entry, 0, ct._Locators()))[0] == ct.K_GEO and len(spec[4]) == 5
    ]
    assert pooled
    assert ct.build_ctable(table).native.layout()[4] == layout_entries(table)
