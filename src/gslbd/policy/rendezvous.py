"""hash: weighted rendezvous (highest random weight) hashing of the client's subnet over the candidates.

The client's subnet (/24 for IPv4, /56 for IPv6) and each candidate's stable id are mixed into a
64-bit hash; the candidate with the highest score answers alone. A client keeps its endpoint while
that endpoint stays a candidate with the same weights, and when one of N candidates goes only the
clients it served move, each to its own next-best candidate.

Weights (endpoint `weight`) follow weighted rendezvous hashing: the hash h is read as a uniform number
in (0, 1) and the score is -weight / ln(h), so a candidate wins a share weight/sum of the subnets.
Weight 0 is never chosen while a candidate with a positive weight exists; when every candidate has
weight 0 they all count as equal (the rule of `policy: weighted`). When the remaining weights are all
equal, -w/ln(h) ranks exactly as h does, so the plan is the plain integer one (`RendezvousPlan`, which
the C table computes); only unequal weights need the float score (`WeightedRendezvousPlan`, which the
C table computes too, with the same double arithmetic and libm's log).

Endpoint ids come from blake2b of the address, and the mix is splitmix64's finalizer in integer
arithmetic, so every worker process and every restart computes the same answer (Python's own hash()
is salted per process and would not). Scores are computed once per subnet and cached per plan.

With `select: first_n` the client's endpoint is followed by the others in the order of their scores
for that endpoint's own id (a fixed backup order per endpoint, different for each, so the backups of
the candidates spread by weight), cut to max_answers. The first address keeps every property above.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, Plan, PolicyEnv
from gslbd.policy.select import followed_by
from gslbd.types import Select

# A plan forgets the subnets it has placed once it has seen this many.
CACHE_LIMIT = 100_000
MASK64 = (1 << 64) - 1
V4_SHIFT = 32 - 24  # keep the /24
V6_SHIFT = 128 - 56  # keep the /56
UNIT = 2.0**-53


def mix64(x: int) -> int:
    """splitmix64's finalizer: a fast, well-spread 64-bit mix of a 64-bit integer."""
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def endpoint_id(endpoint: Endpoint) -> int:
    """A stable 64-bit id of an endpoint, from its address text."""
    digest = hashlib.blake2b(endpoint.address.encode(), digest_size=8, person=b"gslbd-hash").digest()
    return int.from_bytes(digest, "big")


def subnet_key(ip: int, v6: bool) -> int:
    """The client's subnet as one int, with the family in the low bit (v4 and v6 never collide)."""
    return ((ip >> V6_SHIFT) << 1 | 1) if v6 else (ip >> V4_SHIFT) << 1


def best_index(key: int, ids: tuple[int, ...]) -> int:
    """The index of the highest score mix64(mix64(key) ^ id); the first wins a tie."""
    seed = mix64(key)
    best, best_score = 0, -1
    for i, eid in enumerate(ids):
        score = mix64(seed ^ eid)
        if score > best_score:
            best, best_score = i, score
    return best


def weighted_score(h: int, weight: int) -> float:
    """-weight / ln(u), u = the top 53 bits of the 64-bit hash h as a uniform number in (0, 1)."""
    return -weight / math.log(((h >> 11) + 0.5) * UNIT)


def weighted_scores(key: int, ids: tuple[int, ...], weights: tuple[int, ...]) -> list[float]:
    seed = mix64(key)
    return [weighted_score(mix64(seed ^ eid), w) for eid, w in zip(ids, weights, strict=True)]


def best_weighted_index(key: int, ids: tuple[int, ...], weights: tuple[int, ...]) -> int:
    """The index of the highest -w/ln(h) score (weights positive); the first wins a tie."""
    scores = weighted_scores(key, ids, weights)
    return scores.index(max(scores))


def backup_order(
    candidates: tuple[Endpoint, ...], ids: tuple[int, ...], weights: tuple[int, ...], key: int
) -> list[Endpoint]:
    """The candidates by descending weighted score for `key` (an endpoint's id): its backups' order."""
    scores = weighted_scores(key, ids, weights)
    ranked = sorted(range(len(candidates)), key=lambda i: -scores[i])
    return [candidates[i] for i in ranked]


def subnet_text(ip: int, v6: bool) -> str:
    if v6:
        net = (ip >> V6_SHIFT) << V6_SHIFT
        groups = [(net >> (112 - 16 * i)) & 0xFFFF for i in range(4)]
        return ":".join(f"{g:x}" for g in groups) + "::/56"
    net = ip >> V4_SHIFT
    return f"{net >> 16 & 255}.{net >> 8 & 255}.{net & 255}.0/24"


def _cached(cache: dict[int, int], key: int, found: int) -> int:
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[key] = found
    return found


@dataclass(frozen=True, slots=True)
class RendezvousPlan:
    """Equal weights: one variant per candidate (that endpoint alone); the client's subnet picks it."""

    variants: tuple[tuple[Endpoint, ...], ...]
    ids: tuple[int, ...]
    cache: dict[int, int] = field(default_factory=dict, compare=False)
    note: str = field(default="", compare=False)

    @property
    def location_dependent(self) -> bool:
        return True

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        key = ((ip >> V6_SHIFT) << 1 | 1) if v6 else (ip >> V4_SHIFT) << 1
        found = self.cache.get(key)
        if found is None:
            found = _cached(self.cache, key, best_index(key, self.ids))
        return found

    def explain(self, ip: int, v6: bool) -> list[str]:
        chosen = best_index(subnet_key(ip, v6), self.ids)
        line = (
            f"hash: client subnet {subnet_text(ip, v6)} scored against {len(self.ids)} candidates "
            f"(rendezvous hashing); the highest score is {self.variants[chosen][0].address}"
        )
        return [self.note, line] if self.note else [line]


@dataclass(frozen=True, slots=True)
class WeightedRendezvousPlan:
    """Unequal positive weights: one variant per candidate, chosen by the highest -w/ln(h)."""

    variants: tuple[tuple[Endpoint, ...], ...]
    ids: tuple[int, ...]
    weights: tuple[int, ...]
    cache: dict[int, int] = field(default_factory=dict, compare=False)
    note: str = field(default="", compare=False)

    @property
    def location_dependent(self) -> bool:
        return True

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        key = ((ip >> V6_SHIFT) << 1 | 1) if v6 else (ip >> V4_SHIFT) << 1
        found = self.cache.get(key)
        if found is None:
            found = _cached(self.cache, key, best_weighted_index(key, self.ids, self.weights))
        return found

    def shares(self) -> tuple[float, ...]:
        """The expected share of client subnets of each variant."""
        total = sum(self.weights)
        return tuple(w / total for w in self.weights)

    def explain(self, ip: int, v6: bool) -> list[str]:
        scores = weighted_scores(subnet_key(ip, v6), self.ids, self.weights)
        chosen = scores.index(max(scores))
        parts = ", ".join(
            f"{v[0].address} weight {w} ({share:.1%}) score {s:.3f}"
            for v, w, share, s in zip(self.variants, self.weights, self.shares(), scores, strict=True)
        )
        line = (
            f"hash: client subnet {subnet_text(ip, v6)} scored against {len(self.ids)} candidates "
            f"(weighted rendezvous hashing, score -weight/ln(h)): {parts}; "
            f"the highest score is {self.variants[chosen][0].address}"
        )
        return [self.note, line] if self.note else [line]


class Rendezvous:
    name = "hash"

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        if len(candidates) == 1:
            return FixedPlan(candidates, "hash: one candidate")
        positive = tuple(e for e in candidates if e.weight > 0)
        if not positive:
            positive = candidates
            note = "hash: every candidate has weight 0, so all count as equal"
            weights = tuple(1 for _ in candidates)
        else:
            dropped = ", ".join(e.address for e in candidates if e.weight == 0)
            note = f"hash: weight 0, left out while a positive weight exists: {dropped}" if dropped else ""
            weights = tuple(e.weight for e in positive)
        if len(positive) == 1:
            return FixedPlan(positive, f"hash: only {positive[0].address} has a positive weight")
        ids = tuple(endpoint_id(e) for e in positive)
        variants: tuple[tuple[Endpoint, ...], ...] = tuple((e,) for e in positive)
        if service.select is Select.FIRST_N:
            variants = tuple(
                followed_by(v, backup_order(positive, ids, weights, eid), service.max_answers)
                for v, eid in zip(variants, ids, strict=True)
            )
        if len(set(weights)) == 1:
            return RendezvousPlan(variants, ids, note=note)
        return WeightedRendezvousPlan(variants, ids, weights, note=note)
