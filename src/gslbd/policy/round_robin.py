"""round_robin: all candidates (up to max_answers), rotated so that each is first equally often."""

from __future__ import annotations

import random
from dataclasses import dataclass

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, Plan, PolicyEnv


@dataclass(frozen=True, slots=True)
class RotationPlan:
    """Rotation i starts at candidate i; the query counter walks the rotations in turn."""

    variants: tuple[tuple[Endpoint, ...], ...]

    @property
    def location_dependent(self) -> bool:
        return False

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        return seq % len(self.variants)

    def explain(self, ip: int, v6: bool) -> list[str]:
        return [f"round_robin: {len(self.variants)} rotations, the query counter picks one"]


class RoundRobin:
    name = "round_robin"

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        if len(candidates) == 1:
            return FixedPlan(candidates, "round_robin: one candidate")
        n = len(candidates)
        rotations = tuple((candidates[i:] + candidates[:i])[: service.max_answers] for i in range(n))
        return RotationPlan(rotations)
