"""Services with pools whose plans draw, hash or are geo (policy/pools.py PoolPlan over weighted, random,
hash, weighted hash and geo with and without bias), also with shed_load: the C table's pooled geo
entries (wire/_pools.c) and shed entries over them (wire/_shed.c) in the wire tests' worlds."""

from __future__ import annotations

import ipaddress
from dataclasses import replace

from wire_support import ORIGIN, query, svc

from gslbd.model.load import LoadState, ShedLoad
from gslbd.model.service import EndpointKey, Pool, Rule, Service
from gslbd.types import PolicyName

ADDRESSES = ("192.0.2.61", "192.0.2.62", "192.0.2.63", "192.0.2.64", "192.0.2.65", "192.0.2.66")
ADDRESSES_V6 = ("2001:db8::61", "2001:db8::63", "2001:db8::65")
SITE_OF = ("eu", "eu", "us", "us", "ap", "ap", "eu", "us", "ap")
# (policy, uneven endpoint weights): hash with even weights is rendezvous, uneven weighted rendezvous;
# geo "uneven" is geo with a bias (ap +60: europe's clients of pool rest get ap, not the nearer us)
POLICIES = (
    (PolicyName.WEIGHTED, True),
    (PolicyName.RANDOM, False),
    (PolicyName.HASH, False),
    (PolicyName.HASH, True),
    (PolicyName.GEO, False),
    (PolicyName.GEO, True),
)
BIAS = (("ap", 60),)
# shed_load on a pools service: the endpoints' figures in turn (kept, in the band, above high)
SHED = ShedLoad(0.6, 0.8)
SHED_FIGURES = (0.3, 0.65, 0.7, 0.95, 0.75, 0.2, 0.62, 0.1, 0.78)
BY_SITE = (Rule("europe", sites=("eu",)), Rule("asia", sites=("ap",)), Rule("rest"))
BY_NETWORK = (
    Rule("europe", networks=(ipaddress.ip_network("10.1.0.0/16"), ipaddress.ip_network("2001:db8:1::/48"))),
    Rule("asia", sites=("ap",)),
    Rule("rest"),
)


def weight_of(i: int, uneven: bool) -> int:
    return 1 + 3 * i if uneven else 1


def pools_of(min_healthy: int) -> tuple[Pool, ...]:
    """Pools europe (eu, falling back to rest, `min_healthy`), asia (ap, falling back to rest) and rest
    (us and ap)."""
    return (
        Pool("europe", sites=("eu",), fallback="rest", min_healthy=min_healthy),
        Pool("asia", sites=("ap",), fallback="rest"),
        Pool("rest", sites=("us", "ap")),
    )


def pools_service(
    policy: PolicyName,
    uneven: bool,
    rules: tuple[Rule, ...],
    min_healthy: int,
    label: str = "pd",
    shed: bool = False,
) -> Service:
    """Pools europe (eu, falling back to rest), asia (ap, falling back to rest) and rest (us and ap);
    endpoint i weighs 1 + 3i (`uneven`) or 1; geo `uneven` has BIAS; `shed`: with shed_load SHED (the
    snapshot's figures: `shed_figures`)."""
    base = svc(label, *ADDRESSES, *ADDRESSES_V6, policy=policy)
    endpoints = tuple(
        replace(e, site=site, weight=weight_of(i, uneven))
        for i, (e, site) in enumerate(zip(base.endpoints, SITE_OF, strict=True))
    )
    pools = pools_of(min_healthy)
    bias = BIAS if policy is PolicyName.GEO and uneven else ()
    return replace(
        base, endpoints=endpoints, pools=pools, rules=rules, bias=bias, shed_load=SHED if shed else None
    )


def shed_figures(service: Service) -> dict[EndpointKey, LoadState]:
    """The load figures of a pools service with shed_load: SHED_FIGURES in turn."""
    return {
        e.endpoint_key: LoadState(smoothed=f, used=f, good_at=0.0, at=0.0, out=f > SHED.high, raw=f)
        for e, f in zip(service.endpoints, SHED_FIGURES, strict=False)
    }


def pools_services() -> tuple[Service, ...]:
    """One service per drawing or geo policy, and each with shed_load too, rules placed per location (so
    C answers every client of the world's property test at once; the per-network rules are
    tests/unit/wire/test_ctable_pools.py's). Their figures: `shed_figures`."""
    return tuple(
        pools_service(policy, uneven, BY_SITE, 1, label=f"pools-{policy.value}-{int(uneven)}{tag}", shed=shed)
        for policy, uneven in POLICIES
        for shed, tag in ((False, ""), (True, "-shed"))
    )


# Queries of the pools services of `pools_services` (plain, with EDNS, with ECS of a placed and an
# unplaced client): the seeds of the pools fuzz test and of scripts/fuzz_cfast.py.
POOLS_SEEDS = [
    query(f"{label}.{ORIGIN}", rtype, edns=edns, ecs=ecs)
    for label in ("pools-geo-1", "pools-geo-0-shed", "pools-hash-1-shed", "pools-random-0-shed")
    for rtype, edns, ecs in (("A", None, None), ("AAAA", 0, "10.1.2.0/24"), ("A", 0, "2001:db8:ffff::/48"))
]
