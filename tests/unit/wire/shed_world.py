"""Services with shed_load (policy/load.py ShedPlan) over every policy, and the load figures that make them
shed: the C table's shed entries (wire/_shed.c) in the wire tests' worlds and the C fuzz loop."""

from __future__ import annotations

from dataclasses import replace

from wire_support import ORIGIN, ep, make_snapshot, query

from gslbd.model.load import LoadState, ShedLoad
from gslbd.model.service import Service
from gslbd.state.snapshot import Snapshot
from gslbd.types import PolicyName

SHED = ShedLoad(0.6, 0.8)
SITES_CYCLE = ("eu", "us", "ap")


def shed_service(
    label: str,
    policy: PolicyName,
    addresses: tuple[str, ...],
    zone: str,
    *,
    uneven: bool = True,
    **changes: object,
) -> Service:
    """A service of `policy` with shed_load SHED, its endpoints spread over the three sites, weighing
    1, 2, 3 in turn (`uneven`) or all 1."""
    name = f"{label}.{zone}"
    endpoints = tuple(
        replace(ep(name, a, SITES_CYCLE[i % 3]), weight=1 + i % 3 if uneven else 1)
        for i, a in enumerate(addresses)
    )
    return replace(
        Service(name, zone, label, ttl=20, endpoints=endpoints, policy=policy, shed_load=SHED),
        **changes,  # type: ignore[arg-type]
    )


def load_state(used: float, shed: ShedLoad = SHED) -> LoadState:
    """A settled figure: above `high` it is out of the answer."""
    return LoadState(smoothed=used, used=used, good_at=0.0, at=0.0, out=used > shed.high, raw=used)


V4 = tuple(f"192.0.2.{i}" for i in range(161, 166))
V6 = ("2001:db8::a1", "2001:db8::a2", "2001:db8::a3")
# figures per address: below low (kept), in the band (factors 0.75, 0.5, 0.25), above high (out)
FIGURES = (0.3, 0.65, 0.7, 0.75, 0.95, 0.62, 0.78, 0.2)


def shed_services(zone: str) -> tuple[Service, ...]:
    both = (*V4, *V6)
    return (
        shed_service("shed-rr", PolicyName.ROUND_ROBIN, both, zone),
        shed_service("shed-fo", PolicyName.FAILOVER, both, zone),
        shed_service("shed-geo", PolicyName.GEO, both, zone),
        shed_service("shed-hash", PolicyName.HASH, both, zone, uneven=False),
        shed_service("shed-whash", PolicyName.HASH, V4, zone),
        shed_service("shed-rand", PolicyName.RANDOM, both, zone),
        shed_service(
            "shed-wsite", PolicyName.WEIGHTED, both, zone, weights=(("eu", 3), ("us", 1), ("ap", 2))
        ),
        shed_service("shed-one", PolicyName.ROUND_ROBIN, V4, zone, max_answers=1),
        # every candidate above high: all stay
        shed_service("shed-full", PolicyName.ROUND_ROBIN, ("192.0.2.171", "192.0.2.172"), zone),
    )


def shed_snapshot(services: tuple[Service, ...], base: Snapshot | None = None) -> Snapshot:
    """`base` (the wire tests' snapshot) with the shed services' figures: FIGURES in turn, and every
    endpoint of shed-full above high."""
    snapshot = base if base is not None else make_snapshot()
    loads = dict(snapshot.loads)
    for s in services:
        for i, e in enumerate(s.endpoints):
            loads[e.endpoint_key] = load_state(0.9 if s.label == "shed-full" else FIGURES[i % len(FIGURES)])
    return replace(snapshot, loads=loads)


# Queries of the shed services (plain, with EDNS, with ECS of a placed and an unplaced client): the seeds
# of the shed fuzz test and of scripts/fuzz_cfast.py.
SHED_SEEDS = [
    query(f"{label}.{ORIGIN}", rtype, edns=edns, ecs=ecs)
    for label in ("shed-rr", "shed-geo", "shed-whash", "shed-wsite", "shed-full")
    for rtype, edns, ecs in (("A", None, None), ("AAAA", 0, "10.1.2.0/24"), ("A", 0, "2001:db8:ffff::/48"))
]
