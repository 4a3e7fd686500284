"""The pure core of load feedback (policy/load.py): smoothing, the cap per interval, hysteresis at the
shed_load watermarks, what an unreachable load URL leaves, and the candidates and weights answered."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from gslbd.model.load import LoadSource, LoadState, OnMissing, ShedLoad, WeightFrom
from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import SiteInfo
from gslbd.policy import NoLocator, PolicyEnv, plan_service
from gslbd.policy.load import (
    MAX_STEP,
    NO_LOAD,
    RETURN_BAND,
    SCALE,
    STALE_INTERVALS,
    apply_load,
    missed,
    observe,
    shed_factor,
    shed_plan,
)
from gslbd.types import EndpointKind, PolicyName

SOURCE = LoadSource("http://{address}/load", every=5.0, half_life=5.0)
SHED = ShedLoad(0.6, 0.8)


def endpoint(n: int, weight: int = 1) -> Endpoint:
    return Endpoint("app.", f"10.0.0.{n}", EndpointKind.IPV4, "a", weight=weight, load=SOURCE)


def service(policy: PolicyName = PolicyName.WEIGHTED, **kw: object) -> Service:
    return Service("app.", "z.", "app", policy=policy, endpoints=(endpoint(1), endpoint(2)), **kw)  # type: ignore[arg-type]


def test_the_first_figure_is_used_as_reported() -> None:
    state = observe(NO_LOAD, 0.4, 100.0, SOURCE, None)
    assert (state.smoothed, state.used, state.raw, state.good_at) == (0.4, 0.4, 0.4, 100.0)


def test_half_of_a_step_is_in_the_smoothed_figure_after_one_half_life() -> None:
    state = observe(NO_LOAD, 0.0, 0.0, SOURCE, None)
    state = observe(state, 0.1, 5.0, SOURCE, None)
    assert state.smoothed == pytest.approx(0.05)


def test_the_used_figure_moves_at_most_max_step_per_interval() -> None:
    state = observe(NO_LOAD, 0.0, 0.0, SOURCE, None)
    used = [0.0]
    for t in range(1, 6):
        state = observe(state, 1.0, 5.0 * t, SOURCE, None)
        assert state.used is not None
        used.append(state.used)
    steps = [b - a for a, b in pairwise(used)]
    assert all(0 < s <= MAX_STEP + 1e-12 for s in steps)
    assert used[-1] == pytest.approx(5 * MAX_STEP)


def test_shed_factor_falls_linearly_between_the_watermarks() -> None:
    assert [shed_factor(x, SHED) for x in (0.0, 0.6, 0.7, 0.8, 1.5)] == pytest.approx([1, 1, 0.5, 0, 0])
    assert shed_factor(None, SHED) == 1.0


def test_an_endpoint_above_high_comes_back_only_below_the_return_mark() -> None:
    back = SHED.high - RETURN_BAND * (SHED.high - SHED.low)
    state = LoadState(smoothed=0.85, used=0.85, good_at=0.0, at=0.0, out=True)
    still = observe(state, back + 0.01, 100.0, LoadSource("http://x/", half_life=0.0), SHED)
    assert still.out
    returned = observe(still, back - 0.02, 105.0, LoadSource("http://x/", half_life=0.0), SHED)
    assert not returned.out


@pytest.mark.parametrize(
    ("on_missing", "used"), [(OnMissing.KEEP, 0.3), (OnMissing.FULL, 1.0), (OnMissing.IGNORE, None)]
)
def test_an_unreachable_url_keeps_the_last_figure_for_a_bounded_time_then_on_missing(
    on_missing: OnMissing, used: float | None
) -> None:
    source = LoadSource("http://x/", every=5.0, on_missing=on_missing)
    state = observe(NO_LOAD, 0.3, 0.0, source, None)
    within = missed(state, STALE_INTERVALS * 5.0, "connection refused", source, None)
    assert (within.used, within.failures, within.error) == (0.3, 1, "connection refused")
    after = missed(within, STALE_INTERVALS * 5.0 + 1, "connection refused", source, None)
    assert after.used == used


def test_weight_from_load_weighs_by_the_capacity_left() -> None:
    svc = service(weight_from=WeightFrom.LOAD)
    loads = {("app.", "10.0.0.1"): observe(NO_LOAD, 0.25, 0.0, SOURCE, None)}
    applied = apply_load(svc, svc.endpoints, loads)
    assert [e.weight for e in applied.candidates] == [750, SCALE]  # no figure yet: idle
    assert "10.0.0.1 load 0.25 weight 750" in applied.note


def test_shed_load_scales_weights_and_drops_endpoints_above_high() -> None:
    svc = service(shed_load=SHED)
    loads = {
        ("app.", "10.0.0.1"): observe(NO_LOAD, 0.7, 0.0, SOURCE, SHED),
        ("app.", "10.0.0.2"): observe(NO_LOAD, 0.9, 0.0, SOURCE, SHED),
    }
    applied = apply_load(svc, svc.endpoints, loads)
    assert [(e.address, e.weight) for e in applied.candidates] == [("10.0.0.1", 500)]
    assert "above shed_load.high: 10.0.0.2 left the answer" in applied.note


def test_when_every_candidate_is_above_high_all_stay() -> None:
    svc = service(PolicyName.ROUND_ROBIN, shed_load=SHED)
    loads = {e.key: observe(NO_LOAD, 0.95, 0.0, SOURCE, SHED) for e in svc.endpoints}
    applied = apply_load(svc, svc.endpoints, loads)
    assert applied.candidates == svc.endpoints
    assert "every candidate is above shed_load.high, so all stay" in applied.note


def test_shed_load_on_round_robin_keeps_an_endpoint_in_a_share_of_the_draws_equal_to_its_factor() -> None:
    svc = service(PolicyName.ROUND_ROBIN, shed_load=SHED)
    loads = {("app.", "10.0.0.1"): observe(NO_LOAD, 0.75, 0.0, SOURCE, SHED)}  # factor 0.25
    applied = apply_load(svc, svc.endpoints, loads)
    assert applied.factors == pytest.approx((0.25, 1.0))
    env = PolicyEnv(NoLocator(), {"a": SiteInfo("a")}, random.Random(0))
    plan = shed_plan(applied.candidates, applied.factors, lambda members: plan_service(members, svc, env))
    rng = random.Random(7)
    draws = 20_000
    with_first = sum(
        "10.0.0.1" in {e.address for e in plan.variants[plan.pick(0, False, rng, n)]} for n in range(draws)
    )
    assert with_first / draws == pytest.approx(0.25, abs=0.02)
    assert (
        plan.explain(0, False)[0]
        == "shed_load: the candidates per draw: 25% of queries: 10.0.0.1, 10.0.0.2; 75% of queries: 10.0.0.2"
    )
