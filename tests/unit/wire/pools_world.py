"""Services with pools whose plans draw or hash (policy/pools.py PoolPlan over weighted, random, hash and
weighted hash): the C table's pooled geo entries (wire/_pools.c) in the wire tests' worlds."""

from __future__ import annotations

import ipaddress
from dataclasses import replace

from wire_support import svc

from gslbd.model.service import Pool, Rule, Service
from gslbd.types import PolicyName

ADDRESSES = ("192.0.2.61", "192.0.2.62", "192.0.2.63", "192.0.2.64", "192.0.2.65", "192.0.2.66")
ADDRESSES_V6 = ("2001:db8::61", "2001:db8::63", "2001:db8::65")
SITE_OF = ("eu", "eu", "us", "us", "ap", "ap", "eu", "us", "ap")
# (policy, uneven endpoint weights): hash with even weights is rendezvous, uneven weighted rendezvous
POLICIES = (
    (PolicyName.WEIGHTED, True),
    (PolicyName.RANDOM, False),
    (PolicyName.HASH, False),
    (PolicyName.HASH, True),
)
BY_SITE = (Rule("europe", sites=("eu",)), Rule("asia", sites=("ap",)), Rule("rest"))
BY_NETWORK = (
    Rule("europe", networks=(ipaddress.ip_network("10.1.0.0/16"), ipaddress.ip_network("2001:db8:1::/48"))),
    Rule("asia", sites=("ap",)),
    Rule("rest"),
)


def weight_of(i: int, uneven: bool) -> int:
    return 1 + 3 * i if uneven else 1


def pools_service(
    policy: PolicyName, uneven: bool, rules: tuple[Rule, ...], min_healthy: int, label: str = "pd"
) -> Service:
    """Pools europe (eu, falling back to rest), asia (ap, falling back to rest) and rest (us and ap);
    endpoint i weighs 1 + 3i (`uneven`) or 1."""
    base = svc(label, *ADDRESSES, *ADDRESSES_V6, policy=policy)
    endpoints = tuple(
        replace(e, site=site, weight=weight_of(i, uneven))
        for i, (e, site) in enumerate(zip(base.endpoints, SITE_OF, strict=True))
    )
    pools = (
        Pool("europe", sites=("eu",), fallback="rest", min_healthy=min_healthy),
        Pool("asia", sites=("ap",), fallback="rest"),
        Pool("rest", sites=("us", "ap")),
    )
    return replace(base, endpoints=endpoints, pools=pools, rules=rules)


def pools_services() -> tuple[Service, ...]:
    """One service per drawing policy, rules placed per location (so C answers every client of the
    world's property test at once; the per-network rules are tests/unit/wire/test_ctable_pools.py's)."""
    return tuple(
        pools_service(policy, uneven, BY_SITE, 1, label=f"pools-{policy.value}-{int(uneven)}")
        for policy, uneven in POLICIES
    )
