"""The simulated fleet of docs/policies/load.md: endpoints whose load follows the share of the answers they
get, weighed by `weight_from: load` through the real pure core (policy/load.py) and the weighted policy,
with a fake clock. Stated bound: when the balanced split leaves every endpoint below 0.8 load and
`half_life` is its default (3 intervals), every share is within 10 % of the balanced split after
CONVERGED intervals and stays there, moving by at most SWING between two intervals."""

from __future__ import annotations

import random

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gslbd.clock import FakeClock
from gslbd.model.load import LoadSource, LoadState, WeightFrom
from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import SiteInfo
from gslbd.policy import FixedPlan, NoLocator, PolicyEnv, plan_service
from gslbd.policy.load import NO_LOAD, apply_load, observe
from gslbd.policy.weighted import WeightedPlan
from gslbd.types import EndpointKind, PolicyName

EVERY = 5.0
CONVERGED = 60  # intervals (5 minutes at every: 5s)
STEPS = 150
SWING = 0.01  # the most a share moves between two intervals once converged
SOURCE = LoadSource("http://{address}/load", every=EVERY, half_life=3 * EVERY)
ENV = PolicyEnv(NoLocator(), {"a": SiteInfo("a")}, random.Random(0))


def balanced(weights: list[int], capacities: list[int], demand: float) -> list[float]:
    """The split where every endpoint's weight is its configured weight times its capacity left at the
    load that split gives it: s_i = k w_i (1 - s_i D / c_i), k chosen so that the shares sum to 1."""
    lo, hi = 0.0, 1e9
    for _ in range(200):
        k = (lo + hi) / 2
        total = sum(k * w / (1 + k * w * demand / c) for w, c in zip(weights, capacities, strict=True))
        lo, hi = (lo, k) if total > 1 else (k, hi)
    return [k * w / (1 + k * w * demand / c) for w, c in zip(weights, capacities, strict=True)]


def shares(service: Service, loads: dict[tuple[str, str], LoadState]) -> list[float]:
    applied = apply_load(service, service.endpoints, loads)
    plan = plan_service(applied.candidates, service, ENV)
    if isinstance(plan, FixedPlan):  # one endpoint has all the capacity left
        return [1.0 if e.address == plan.answer[0].address else 0.0 for e in service.endpoints]
    assert isinstance(plan, WeightedPlan)
    by_address = dict(zip((v[0].address for v in plan.variants), plan.shares(), strict=True))
    return [by_address.get(e.address, 0.0) for e in service.endpoints]


def simulate(weights: list[int], capacities: list[int], demand: float) -> list[list[float]]:
    endpoints = tuple(
        Endpoint("app.", f"10.0.0.{i}", EndpointKind.IPV4, "a", weight=w, load=SOURCE)
        for i, w in enumerate(weights)
    )
    service = Service(
        "app.", "z.", "app", policy=PolicyName.WEIGHTED, weight_from=WeightFrom.LOAD, endpoints=endpoints
    )
    clock = FakeClock()
    loads: dict[tuple[str, str], LoadState] = {e.key: NO_LOAD for e in endpoints}
    history = []
    for _ in range(STEPS):
        split = shares(service, loads)
        history.append(split)
        for endpoint, share, capacity in zip(endpoints, split, capacities, strict=True):
            figure = share * demand / capacity  # the load the endpoint reports: its share of the demand
            loads[endpoint.key] = observe(loads[endpoint.key], figure, clock.monotonic(), SOURCE, None)
        clock.advance(EVERY)
    return history


fleets = st.integers(2, 8).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(1, 10), min_size=n, max_size=n),
        st.lists(st.integers(1, 10), min_size=n, max_size=n),
        st.floats(0.05, 1.0),
    )
)


@settings(max_examples=40, deadline=None)
@given(fleets)
def test_a_fleet_following_its_shares_converges_to_the_balanced_split_without_oscillating(
    fleet: tuple[list[int], list[int], float],
) -> None:
    weights, capacities, utilisation = fleet
    demand = utilisation * sum(capacities)
    target = balanced(weights, capacities, demand)
    # within the stated bound only: the balanced split leaves every endpoint below 0.8 load
    assume(max(s * demand / c for s, c in zip(target, capacities, strict=True)) <= 0.8)
    history = simulate(weights, capacities, demand)
    for split in history[CONVERGED:]:
        for share, want in zip(split, target, strict=True):
            assert abs(share - want) <= 0.1 * want
    for before, after in zip(history[CONVERGED:], history[CONVERGED + 1 :], strict=False):
        assert max(abs(a - b) for a, b in zip(before, after, strict=True)) <= SWING


def test_an_idle_fleet_of_equal_endpoints_keeps_an_even_split() -> None:
    history = simulate([1, 1, 1], [4, 4, 4], 3.0)
    assert all(abs(s - 1 / 3) < 1e-9 for split in history for s in split)
