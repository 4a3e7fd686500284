"""hash: rendezvous (highest random weight) hashing of the client's subnet over the candidates.

The client's subnet (/24 for IPv4, /56 for IPv6) and each candidate's stable id are mixed into a
64-bit score; the candidate with the highest score answers alone. A client keeps its endpoint while
that endpoint stays a candidate, and when one of N candidates goes only the clients it served move
(about 1/N of them), each to its own next-best candidate.

Endpoint ids come from blake2b of the address, and the mix is splitmix64's finalizer in integer
arithmetic, so every worker process and every restart computes the same answer (Python's own hash()
is salted per process and would not). Scores are computed once per subnet and cached per plan.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from gslbd.model.service import Endpoint, Service
from gslbd.policy.base import FixedPlan, Plan, PolicyEnv

# A plan forgets the subnets it has placed once it has seen this many.
CACHE_LIMIT = 100_000
MASK64 = (1 << 64) - 1
V4_SHIFT = 32 - 24  # keep the /24
V6_SHIFT = 128 - 56  # keep the /56


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


def subnet_text(ip: int, v6: bool) -> str:
    if v6:
        net = (ip >> V6_SHIFT) << V6_SHIFT
        groups = [(net >> (112 - 16 * i)) & 0xFFFF for i in range(4)]
        return ":".join(f"{g:x}" for g in groups) + "::/56"
    net = ip >> V4_SHIFT
    return f"{net >> 16 & 255}.{net >> 8 & 255}.{net & 255}.0/24"


@dataclass(frozen=True, slots=True)
class RendezvousPlan:
    """One variant per candidate (that endpoint alone); the client's subnet picks it."""

    variants: tuple[tuple[Endpoint, ...], ...]
    ids: tuple[int, ...]
    cache: dict[int, int] = field(default_factory=dict, compare=False)

    @property
    def location_dependent(self) -> bool:
        return True

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        key = ((ip >> V6_SHIFT) << 1 | 1) if v6 else (ip >> V4_SHIFT) << 1
        found = self.cache.get(key)
        if found is None:
            found = best_index(key, self.ids)
            if len(self.cache) >= CACHE_LIMIT:
                self.cache.clear()
            self.cache[key] = found
        return found

    def explain(self, ip: int, v6: bool) -> list[str]:
        chosen = best_index(subnet_key(ip, v6), self.ids)
        return [
            f"hash: client subnet {subnet_text(ip, v6)} scored against {len(self.ids)} candidates "
            f"(rendezvous hashing); the highest score is {self.variants[chosen][0].address}"
        ]


class Rendezvous:
    name = "hash"

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan:
        if len(candidates) == 1:
            return FixedPlan(candidates, "hash: one candidate")
        return RendezvousPlan(tuple((e,) for e in candidates), tuple(endpoint_id(e) for e in candidates))
