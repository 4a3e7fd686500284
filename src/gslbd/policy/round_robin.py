"""round_robin: all candidates (up to max_answers), rotated so that each is first equally often."""

from __future__ import annotations

import random
from dataclasses import dataclass

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, Plan, PolicyEnv


def rotations(members: tuple[Endpoint, ...], max_answers: int) -> tuple[tuple[Endpoint, ...], ...]:
    """Rotation i starts at member i, cut to max_answers."""
    return tuple((members[i:] + members[:i])[:max_answers] for i in range(len(members)))


@dataclass(frozen=True, slots=True)
class RotationPlan:
    """Rotations of one set of candidates; the query counter walks them in turn.

    Used by round_robin, by failover inside the chosen tier, and by geo when every client would get
    the same set."""

    variants: tuple[tuple[Endpoint, ...], ...]
    notes: tuple[str, ...] = ()  # what `explain` says

    @property
    def location_dependent(self) -> bool:
        return False

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        return seq % len(self.variants)

    def explain(self, ip: int, v6: bool) -> list[str]:
        return list(self.notes)


class RoundRobin:
    name = "round_robin"

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        if len(candidates) == 1:
            return FixedPlan(candidates, "round_robin: one candidate")
        note = f"round_robin: {len(candidates)} rotations, the query counter picks one"
        return RotationPlan(rotations(candidates, service.max_answers), (note,))
