"""weighted: a share of the queries per site (service `weights`) or per endpoint (endpoint `weight`).

With site weights, one site is drawn per query with probability weight/sum over the sites that have
candidates, and that site's candidates (in candidate order, up to max_answers) are the answer. A site
that is not listed in `weights` has weight 0. Without site weights, one endpoint is drawn per query
by its own weight and answered alone, so the split holds even behind resolvers that reorder records.

Weight 0 never answers while a choice with a positive weight exists; when every choice has weight 0
they are all drawn equally (a drained service still answers).

With `select: first_n` the drawn site's (or endpoint's) candidates are followed by the others in
descending weight (weight 0 only when every weight is 0), cut to max_answers.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, Plan, PolicyEnv
from gslbd.policy.select import by_weight, followed_by
from gslbd.types import Select


@dataclass(frozen=True, slots=True)
class WeightedPlan:
    """Variants with positive weights; `bounds` are the cumulative weights but the last, so that
    bisecting a uniform draw in [0, total) lands on variant i with probability weights[i]/total."""

    variants: tuple[tuple[Endpoint, ...], ...]
    weights: tuple[int, ...]
    labels: tuple[str, ...]
    bounds: tuple[float, ...]
    total: float
    by_site: bool

    @property
    def location_dependent(self) -> bool:
        return False

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        return bisect_right(self.bounds, rng.random() * self.total)

    def shares(self) -> tuple[float, ...]:
        """The probability of each variant."""
        return tuple(w / self.total for w in self.weights)

    def explain(self, ip: int, v6: bool) -> list[str]:
        unit = "site" if self.by_site else "endpoint"
        parts = ", ".join(
            f"{label} {weight} ({share:.1%})"
            for label, weight, share in zip(self.labels, self.weights, self.shares(), strict=True)
        )
        return [f"weighted: one {unit} drawn per query by weight: {parts}"]


def weighted_plan(choices: list[tuple[str, int, tuple[Endpoint, ...]]], by_site: bool, what: str) -> Plan:
    """A plan over (label, weight, answer) choices, applying the weight-0 rule."""
    positive = [c for c in choices if c[1] > 0]
    if not positive:
        positive = [(label, 1, answer) for label, _, answer in choices]
        note = f"weighted: every {what} has weight 0, so all are drawn equally"
    else:
        note = ""
    if len(positive) == 1:
        label, _, answer = positive[0]
        reason = note or f"weighted: only {label} has a positive weight among the candidates"
        return FixedPlan(answer, reason)
    cumulative: list[float] = []
    running = 0
    for _, weight, _ in positive:
        running += weight
        cumulative.append(float(running))
    return WeightedPlan(
        variants=tuple(c[2] for c in positive),
        weights=tuple(c[1] for c in positive),
        labels=tuple(c[0] for c in positive),
        bounds=tuple(cumulative[:-1]),
        total=float(running),
        by_site=by_site,
    )


class Weighted:
    name = "weighted"

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        first_n = service.select is Select.FIRST_N
        n = service.max_answers
        if service.weights is not None:
            site_weight = dict(service.weights)
            per_site: dict[str, list[Endpoint]] = {}
            for endpoint in candidates:
                per_site.setdefault(endpoint.site, []).append(endpoint)
            rest = by_weight((e, site_weight.get(e.site, 0)) for e in candidates) if first_n else []
            choices = [
                (site, site_weight.get(site, 0), followed_by(tuple(members), rest, n))
                for site, members in per_site.items()
            ]
            return weighted_plan(choices, True, "site with candidates")
        if len(candidates) == 1:
            return FixedPlan(candidates, "weighted: one candidate")
        rest = by_weight((e, e.weight) for e in candidates) if first_n else []
        choices = [(e.address, e.weight, followed_by((e,), rest, n)) for e in candidates]
        return weighted_plan(choices, False, "candidate")
