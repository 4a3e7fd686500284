"""random: all candidates (up to max_answers), shuffled.

Shuffling per query would build a list per query, so the permutations are drawn once at plan time
(with the plan-time rng) and each query picks one of them uniformly with the query-time rng. With at
most four candidates every ordering exists (all of them, each equally likely); with more, a bounded
set is drawn in which every candidate leads equally often and the rest of each order is shuffled.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, Plan, PolicyEnv

# With n! <= ALL_ORDERS_LIMIT every ordering is kept; above it about this many random ones.
ALL_ORDERS_LIMIT = 24


@dataclass(frozen=True, slots=True)
class ShufflePlan:
    """Precomputed orders of the candidates; each query draws one uniformly."""

    variants: tuple[tuple[Endpoint, ...], ...]
    count: int
    exhaustive: bool

    @property
    def location_dependent(self) -> bool:
        return False

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        return int(rng.random() * self.count)

    def explain(self, ip: int, v6: bool) -> list[str]:
        kind = "every possible one" if self.exhaustive else "drawn at plan time"
        return [f"random: {self.count} orders ({kind}), each query draws one uniformly"]


def shuffled_orders(
    candidates: tuple[Endpoint, ...], max_answers: int, rng: random.Random
) -> tuple[tuple[tuple[Endpoint, ...], ...], bool]:
    """The orders a random plan draws from, and whether they are all the possible ones.

    Small candidate sets give every distinct answer (ordered selections of up to max_answers);
    larger ones give a multiple of len(candidates) orders in which each candidate leads equally often.
    """
    n = len(candidates)
    size = min(n, max_answers)
    if math_factorial(n) <= ALL_ORDERS_LIMIT:
        return tuple(itertools.permutations(candidates, size)), True
    if size == 1:
        return tuple((c,) for c in candidates), True
    rounds = -(-ALL_ORDERS_LIMIT // n)  # ceil: every candidate leads `rounds` times
    orders: list[tuple[Endpoint, ...]] = []
    for _ in range(rounds):
        for i, lead in enumerate(candidates):
            rest = list(candidates[:i] + candidates[i + 1 :])
            rng.shuffle(rest)
            orders.append((lead, *rest[: size - 1]))
    return tuple(orders), False


def math_factorial(n: int) -> int:
    """n! computed only as far as needed to compare with the limit (n may be large)."""
    out = 1
    for k in range(2, n + 1):
        out *= k
        if out > ALL_ORDERS_LIMIT:
            return out
    return out


class RandomOrder:
    name = "random"

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        if len(candidates) == 1:
            return FixedPlan(candidates, "random: one candidate")
        orders, exhaustive = shuffled_orders(candidates, service.max_answers, env.rng)
        return ShufflePlan(orders, len(orders), exhaustive)
