"""Load-balanced services and their endpoints."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gslbd.model.check import Check, CheckSet
from gslbd.model.load import LoadSource, ShedLoad, WeightFrom
from gslbd.model.topology import IPNetwork, Locality
from gslbd.types import AdminState, AllDown, EndpointKind, PolicyName, Select

# (service fqdn, endpoint address): identifies an endpoint everywhere (state, API, Redis keys).
EndpointKey = tuple[str, str]
# The key of one check of an endpoint with several: (service, "<address>#<check name>").
UNIT_SEPARATOR = "#"


def unit_key(key: EndpointKey, check: str) -> EndpointKey:
    return (key[0], f"{key[1]}{UNIT_SEPARATOR}{check}")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One answerable target of a service.

    `address` is a normalized IPv4/IPv6 address text, or an absolute lower-case hostname ending in a
    dot (answered as a CNAME). `service` is the fqdn of the owning service. `tags` are short labels
    (config/tags.py) that a bulk admin change selects by.

    `checks` (`endpoints[].checks`): several checks combined by `health`; such an endpoint has no
    `check` of its own. What is probed are its units (app/reconcile.py `probed_endpoints`): the same
    endpoint with `check` set to one of `checks.checks`, keyed `(service, "<address>#<check>")`, whose
    verdicts combine into the endpoint's (health/combine.py).
    """

    service: str
    address: str
    kind: EndpointKind
    site: str
    locality: Locality = Locality()
    weight: int = 1
    priority: int = 0
    check: Check | None = None
    probe_address: str | None = None
    admin: AdminState = AdminState.OBEY
    tags: tuple[str, ...] = ()  # `endpoints[].tags`: what an admin selector's `tags` matches
    checks: CheckSet | None = None  # `endpoints[].checks` and `health`
    load: LoadSource | None = None  # `endpoints[].load`, else the service's `load` (model/load.py)

    @property
    def key(self) -> EndpointKey:
        if self.checks is None:
            return (self.service, self.address)
        return self.endpoint_key if self.check is None else unit_key(self.endpoint_key, self.check.name)

    @property
    def endpoint_key(self) -> EndpointKey:
        """The key of the endpoint itself (a unit's key names its check too)."""
        return (self.service, self.address)

    @property
    def unit(self) -> bool:
        """Whether this value is one check of an endpoint with several (`checks`)."""
        return self.checks is not None and self.check is not None

    @property
    def rtype(self) -> str:
        """The record type this endpoint is answered as: A, AAAA or CNAME."""
        if self.kind is EndpointKind.IPV4:
            return "A"
        if self.kind is EndpointKind.IPV6:
            return "AAAA"
        return "CNAME"


@dataclass(frozen=True, slots=True)
class HttpsRecord:
    """`services[].https`: an HTTPS record (RFC 9460, type 65) at the service name, ServiceMode with
    the service itself as target; hints are the addresses the A/AAAA answer gives the client."""

    alpn: tuple[str, ...] = ()
    port: int | None = None


@dataclass(frozen=True, slots=True)
class SrvRecord:
    """`services[].srv`: SRV records at `name` (absolute) for the healthy endpoints, on `port`."""

    name: str
    port: int


@dataclass(frozen=True, slots=True)
class MinHealthy:
    """`services[].min_healthy`: how many of a site's endpoints of one address family must be up for the
    site to count as up (gdnsd multifo's up_thresh): `count` of them when it is not 0, else a `share`
    (0 < share <= 1) of them, rounded up. A site below it counts as failed (answer/min_healthy.py)."""

    count: int = 0
    share: float = 0.0

    def needed(self, total: int) -> int:
        """How many of `total` endpoints must be up (at least 1)."""
        if self.count:
            return self.count
        return max(1, math.ceil(round(self.share * total, 9)))  # 0.1 * 30 is 3.0000000000000004

    @property
    def text(self) -> str:
        """As configured: a count ("2") or a share as a percentage ("50%")."""
        return str(self.count) if self.count else f"{self.share * 100:g}%"


@dataclass(frozen=True, slots=True)
class Pool:
    """`services[].pools.<name>`: a set of the service's endpoints (by site and/or address) that a rule can
    send clients to; `fallback` names the pool taken while this one has fewer than `min_healthy` up."""

    name: str
    sites: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()
    fallback: str | None = None
    min_healthy: int = 1

    def holds(self, endpoint: Endpoint) -> bool:
        return endpoint.site in self.sites or endpoint.address in self.addresses


@dataclass(frozen=True, slots=True)
class Rule:
    """`services[].rules[]`: clients matching every condition given (each a list: any value of it)
    go to `pool`; a rule with no condition is the catch-all."""

    pool: str
    networks: tuple[IPNetwork, ...] = ()
    sites: tuple[str, ...] = ()
    countries: tuple[str, ...] = ()
    continents: tuple[str, ...] = ()
    asns: tuple[int, ...] = ()

    @property
    def catch_all(self) -> bool:
        return not (self.networks or self.sites or self.countries or self.continents or self.asns)


@dataclass(frozen=True, slots=True)
class TtlRange:
    """`services[].ttl: {max: 300, min: 5}`: the answer's TTL is the least time until the answer could
    change (answer/ttl.py), at most `max` and never below `min` (whole seconds)."""

    min: int
    max: int


@dataclass(frozen=True, slots=True)
class Service:
    """A load-balanced name. `name` is absolute and lower case; `zone` is the origin holding it;
    `label` is the name relative to the zone ("app" for app.gslb.example.com. in gslb.example.com.)."""

    name: str
    zone: str
    label: str
    policy: PolicyName = PolicyName.ROUND_ROBIN
    failover_order: tuple[str, ...] = ()
    weights: tuple[tuple[str, int], ...] | None = None  # per-site weights, in config order
    ttl: int = 30
    max_answers: int = 8
    all_down: AllDown = AllDown.SERVE_ALL
    fallback: tuple[str, ...] = ()  # addresses, or one absolute hostname (answered as CNAME)
    locality_names: bool = False
    endpoints: tuple[Endpoint, ...] = ()
    https: HttpsRecord | None = None
    srv: SrvRecord | None = None
    min_healthy: MinHealthy | None = None
    bias: tuple[tuple[str, int], ...] = ()  # policy geo: per-site bias -99..99 (Route 53 geoproximity)
    select: Select = Select.ROTATE
    pools: tuple[Pool, ...] = ()  # with rules: policy/pools.py
    rules: tuple[Rule, ...] = ()
    # Seconds a site must stay without candidates (failover) or healthy again (failback) before the
    # answer moves away from it or back to it (answer/delays.py); 0: at once.
    failover_delay: float = 0.0
    failback_delay: float = 0.0
    ttl_range: TtlRange | None = None  # a health-driven TTL; None: `ttl` is fixed
    weight_from: WeightFrom = WeightFrom.CONFIG  # policy weighted: `weight_from: load` (policy/load.py)
    shed_load: ShedLoad | None = None  # `shed_load: {low, high}` on any policy (policy/load.py)

    @property
    def wildcard(self) -> bool:
        """A wildcard service (`*.apps.<zone>`) answers every name below its parent (RFC 4592)."""
        return self.name.startswith("*.")
