"""Load feedback, the pure core: from the figures endpoints report to the weights and shares answered.

Everything here is a function of its arguments (time comes in as `now`, from the caller's injected clock);
the health scheduler fetches the figures (health/load.py), the app keeps one `LoadState` per endpoint in
the health book and the answer builder calls `apply_load` for the services that use them.

A figure is the endpoint's load as a share of its capacity: 0 idle, 1 full (above 1: overloaded).

Stable by construction (docs/policies/load.md, tests/unit/policy/test_load_fleet.py):
  - smoothing: the reported figures go through an EWMA whose half-life is `load.half_life`: after a step
    change of the reported load, half of the step is in the smoothed figure after one half-life;
  - a cap: the figure the answers use (`used`) moves towards the smoothed one by at most MAX_STEP per
    interval (`load.every`), and not at all while they differ by less than DEAD_BAND (no rebuild for
    noise); it is kept to FIGURE_DIGITS decimals, exactly what peer sites are told;
  - hysteresis at `shed_load.high`: an endpoint whose used figure went above `high` leaves the answer
    and comes back only once it is below `high - RETURN_BAND x (high - low)`.
An unreachable load URL keeps the last good figure for STALE_INTERVALS intervals; after that
`on_missing` decides: `keep` the last good figure, `full` (the figure becomes 1), `ignore` (no figure).

Weights (`weight_from: load`, PowerDNS pickselfweighted style with the capacity left):
    weight = endpoint weight x SCALE x max(0, 1 - used)
and `shed_load: {low, high}` multiplies every weight by the shed factor:
    1 below `low`, (high - used) / (high - low) between the watermarks, 0 above `high`,
an endpoint above `high` (with the hysteresis) leaving the candidates unless every candidate is above it.
An endpoint without a figure (none yet, or `on_missing: ignore`) counts as idle (used 0).
"""

from __future__ import annotations

import math
import random
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from itertools import pairwise

from gslbd.model.load import LoadSource, LoadState, OnMissing, ShedLoad, WeightFrom
from gslbd.model.service import Endpoint, EndpointKey, Service
from gslbd.policy.base import Plan
from gslbd.policy.weighted import WeightedPlan
from gslbd.types import PolicyName

MAX_STEP = 0.1  # of full load: how far the used figure moves per interval at most
DEAD_BAND = 0.005  # the used figure stays while the smoothed one is closer than this
RETURN_BAND = 0.25  # back below high - RETURN_BAND x (high - low) to come back after leaving above high
STALE_INTERVALS = 3  # an unreachable URL keeps the last good figure this many intervals, then on_missing
SCALE = 1000  # an endpoint's weight x SCALE is its weight at no load (integer weights, 0.1 % steps)
FIGURE_DIGITS = 3  # the used figure is kept to 3 decimals: what the exchange zone publishes to peer
# sites exactly (answer/exchange_names.py), so that every site draws by the same weights


NO_LOAD = LoadState()


def alpha(dt: float, half_life: float) -> float:
    """The EWMA weight of a new figure `dt` seconds after the previous one."""
    if half_life <= 0 or dt <= 0:
        return 1.0 if half_life <= 0 else 0.0
    return 1.0 - math.pow(2.0, -dt / half_life)


def _moved(used: float | None, target: float, dt: float, every: float) -> float:
    """`used` moved towards `target` by at most MAX_STEP per interval (the dead band holds it)."""
    if used is None:
        return target
    gap = target - used
    if abs(gap) < DEAD_BAND:
        return used
    cap = MAX_STEP * max(1.0, dt / every) if every > 0 else MAX_STEP
    return used + max(-cap, min(cap, gap))


def out_of_answer(out: bool, used: float | None, shed: ShedLoad | None) -> bool:
    """Whether shedding keeps the endpoint out of the answer (hysteresis at `high`)."""
    if shed is None or used is None:
        return False
    if not out:
        return used > shed.high
    return used >= shed.high - RETURN_BAND * (shed.high - shed.low)


def observe(
    state: LoadState, figure: float, now: float, source: LoadSource, shed: ShedLoad | None
) -> LoadState:
    """A good figure reported at `now`."""
    if state.smoothed is None or state.at is None:
        smoothed = figure
        used = figure if state.used is None else _moved(state.used, figure, source.every, source.every)
    else:
        dt = now - state.at
        smoothed = state.smoothed + alpha(dt, source.half_life) * (figure - state.smoothed)
        used = _moved(state.used, smoothed, dt, source.every)
    used = round(used, FIGURE_DIGITS)
    return LoadState(smoothed, used, now, now, out_of_answer(state.out, used, shed), figure, 0, "")


def missed(state: LoadState, now: float, error: str, source: LoadSource, shed: ShedLoad | None) -> LoadState:
    """No good figure at `now` (unreachable, an HTTP error, or garbage): the last good one stays for
    STALE_INTERVALS intervals, then `on_missing` decides."""
    stale = state.good_at is None or now - state.good_at > STALE_INTERVALS * source.every
    used = state.used
    if stale and source.on_missing is OnMissing.FULL:
        used = 1.0
    elif stale and source.on_missing is OnMissing.IGNORE:
        used = None
    out = out_of_answer(state.out, used, shed)
    return replace(state, used=used, at=now, out=out, failures=state.failures + 1, error=error)


def uses_load(service: Service) -> bool:
    return service.weight_from is WeightFrom.LOAD or service.shed_load is not None


def shed_factor(used: float | None, shed: ShedLoad | None) -> float:
    """1 below `low`, falling linearly to 0 at `high`, 0 above."""
    if shed is None or used is None or used <= shed.low:
        return 1.0
    if used >= shed.high:
        return 0.0
    return (shed.high - used) / (shed.high - shed.low)


def load_weight(endpoint: Endpoint, state: LoadState, service: Service) -> int:
    """The weight the weighted policy draws `endpoint` by (see the module docstring)."""
    used = state.used
    left = max(0.0, 1.0 - used) if service.weight_from is WeightFrom.LOAD and used is not None else 1.0
    return round(endpoint.weight * SCALE * left * shed_factor(used, service.shed_load))


@dataclass(frozen=True, slots=True)
class Applied:
    """The candidates after load feedback, and one line saying what it did (for explain). `factors`:
    the candidates' shed factors when the policy does not draw by endpoint weight and some is below 1
    (`shed_plan` then spreads the shedding over draws), else None."""

    candidates: tuple[Endpoint, ...]
    note: str = ""
    factors: tuple[float, ...] | None = None


def apply_load(
    service: Service, candidates: tuple[Endpoint, ...], loads: Mapping[EndpointKey, LoadState]
) -> Applied:
    """The candidates load feedback leaves, with their weights when the policy is weighted."""
    if not uses_load(service) or not candidates:
        return Applied(candidates)
    states = [loads.get(e.endpoint_key, NO_LOAD) for e in candidates]
    notes: list[str] = []
    kept = [(e, s) for e, s in zip(candidates, states, strict=True) if not s.out]
    if not kept:
        kept = list(zip(candidates, states, strict=True))
        notes.append("every candidate is above shed_load.high, so all stay")
    elif len(kept) < len(candidates):
        gone = [e.address for e, s in zip(candidates, states, strict=True) if s.out]
        notes.append(f"above shed_load.high: {', '.join(gone)} left the answer")
    if service.policy is PolicyName.WEIGHTED and service.weights is None:
        out = tuple(replace(e, weight=load_weight(e, s, service)) for e, s in kept)
        parts = ", ".join(
            f"{e.address} load {_figure(s)} weight {w.weight}" for (e, s), w in zip(kept, out, strict=True)
        )
        notes.append(f"load: {parts}")
        return Applied(out, "; ".join(notes))
    factors = tuple(shed_factor(s.used, service.shed_load) for _, s in kept)
    parts = ", ".join(f"{e.address} load {_figure(s)}" for e, s in kept)
    notes.append(f"load: {parts}")
    shedding = factors if any(f < 1.0 for f in factors) else None
    return Applied(tuple(e for e, _ in kept), "; ".join(notes), shedding)


@dataclass(frozen=True, slots=True)
class ShedPlan:
    """shed_load on a policy that does not draw by endpoint weight: one uniform draw u per query keeps
    the candidates whose shed factor is above u, and the policy's own plan over those answers (so an
    endpoint is in the candidate set of a share `factor` of the queries). `levels` are the plans per
    band of u, `bounds` the bands' upper ends but the last; the variants are theirs, one after another.
    Answered by the C table as a `shed` entry (wire/ctable.py, wire/_shed.c): a level per band."""

    levels: tuple[Plan, ...]
    bounds: tuple[float, ...]
    offsets: tuple[int, ...]
    variants: tuple[tuple[Endpoint, ...], ...]
    sets: tuple[tuple[str, ...], ...]
    shares: tuple[float, ...]

    @property
    def location_dependent(self) -> bool:
        return any(level.location_dependent for level in self.levels)

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        j = bisect_right(self.bounds, rng.random())
        return self.offsets[j] + self.levels[j].pick(ip, v6, rng, seq)

    def explain(self, ip: int, v6: bool) -> list[str]:
        bands = "; ".join(
            f"{share:.0%} of queries: {', '.join(names)}"
            for share, names in zip(self.shares, self.sets, strict=True)
        )
        return [f"shed_load: the candidates per draw: {bands}", *self.levels[-1].explain(ip, v6)]


def shed_plan(
    candidates: tuple[Endpoint, ...], factors: tuple[float, ...], plan: Callable[[tuple[Endpoint, ...]], Plan]
) -> Plan:
    """The plan of `candidates` with their shed factors (see ShedPlan); `plan` is the policy's."""
    if not any(f > 0.0 for f in factors):  # every candidate at or above high: all stay
        return plan(candidates)
    cuts = sorted({f for f in factors if 0.0 < f < 1.0})
    edges = [0.0, *cuts, 1.0]
    levels: list[Plan] = []
    sets: list[tuple[str, ...]] = []
    shares: list[float] = []
    bounds: list[float] = []
    for low, high in pairwise(edges):
        members = tuple(e for e, f in zip(candidates, factors, strict=True) if f > low)
        if not members:  # nobody is kept this far up: the last set answers these draws too
            shares[-1] += high - low
            bounds[-1] = high
            continue
        levels.append(plan(members))
        sets.append(tuple(e.address for e in members))
        shares.append(high - low)
        bounds.append(high)
    if len(levels) == 1:
        return levels[0]
    offsets: list[int] = []
    variants: list[tuple[Endpoint, ...]] = []
    for level in levels:
        offsets.append(len(variants))
        variants.extend(level.variants)
    return ShedPlan(
        tuple(levels), tuple(bounds[:-1]), tuple(offsets), tuple(variants), tuple(sets), tuple(shares)
    )


def _figure(state: LoadState) -> str:
    return "none" if state.used is None else f"{state.used:.2f}"


def variant_shares(plan: Plan) -> tuple[float, ...] | None:
    """The probability of each of the plan's variants when it does not depend on the client (None when
    it does): a draw by weight its weights', shed_load its bands' times its levels', any other plan's
    equal (rotations and shuffles spread evenly over their variants)."""
    if plan.location_dependent:
        return None
    if isinstance(plan, WeightedPlan):
        return plan.shares()
    if isinstance(plan, ShedPlan):
        out: list[float] = []
        for band, level in zip(plan.shares, plan.levels, strict=True):
            inner = variant_shares(level)
            if inner is None:
                return None
            out.extend(band * share for share in inner)
        return tuple(out)
    count = len(plan.variants)
    return tuple(1 / count for _ in range(count))


def endpoint_shares(plan: Plan) -> dict[str, float] | None:
    """The share of the answers each endpoint is in (by address), when the plan does not depend on the
    client: what the console shows next to each endpoint's load."""
    shares = variant_shares(plan)
    if shares is None:
        return None
    out: dict[str, float] = {}
    for variant, share in zip(plan.variants, shares, strict=True):
        for endpoint in dict.fromkeys(variant):
            out[endpoint.address] = out.get(endpoint.address, 0.0) + share
    return out
