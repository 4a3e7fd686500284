"""Pools whose plans draw or hash answered by the C table (wire/_pools.c): for the same seq and draw C
writes the bytes (and the ECS scope) the Python PoolPlan answers, for weighted, random, hash and
weighted hash pools, rules placed per location or per client prefix, clients in every location; over
many queries a weighted pool's endpoints get the shares their weights say."""

from __future__ import annotations

import random
from dataclasses import replace

import dns.message
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pools_world import ADDRESSES, BY_NETWORK, BY_SITE, POLICIES, pools_service, weight_of
from test_ctable import NETWORKS, SITES
from wire_support import CONFIG, ORIGIN, SERVICES, FixedDraw, entry_kind, make_snapshot, oracle, query

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
    view = build_view(replace(CONFIG, services=(*SERVICES, service)), make_snapshot(), ENV)
    return view, compile_table(view, max_udp_payload=1232, use_client_subnet=use_client_subnet)


def c_answer(native: ct.CTable, wire: bytes, ip: int, v6: bool, seq: int, draw: float) -> bytes | None:
    """C's answer for the choice; a client only Python places is placed once (as the responder does)."""
    out = native.native.answer(wire, ip, v6, False, seq, draw)
    if out is None:
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
)
def test_c_answers_drawing_pools_with_the_python_bytes_for_the_same_seq_and_draw(
    policy: tuple[PolicyName, bool],
    rules: tuple[Rule, ...],
    min_healthy: int,
    rtype: str,
    ecs: str | None,
    draws: list[float],
    repeats: int,
) -> None:
    """min_healthy 3 sends europe's clients down its fallback chain; the ECS scope is in the bytes."""
    view, table = table_of(pools_service(*policy, rules, min_healthy))
    native = ct.build_ctable(table)
    wire = query(f"pd.{ORIGIN}", rtype, edns=0, ecs=ecs)
    assert entry_kind(table, wire) == ct.K_GEO  # answered by C, not left to Python
    for ip, v6 in CLIENTS:
        for draw in draws:
            for seq in range(repeats):  # seqs 0, 1, 2 ...: a rotation inside the variant would show
                python = oracle(view, table, wire, ip, v6, seq=seq, rng=FixedDraw(draw))
                assert python is not None
                assert c_answer(native, wire, ip, v6, seq, draw) == python


def test_a_pool_whose_plan_c_does_not_answer_leaves_the_service_to_python() -> None:
    """policy: geo inside the pools: the pool's plan is not one C holds as a class's entry."""
    _, table = table_of(pools_service(PolicyName.GEO, False, BY_SITE, 1))
    assert entry_kind(table, query(f"pd.{ORIGIN}", edns=0)) == ct.K_PYTHON


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
