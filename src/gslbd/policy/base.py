"""The contract every policy keeps.

A policy turns the candidates of one question (healthy endpoints of the asked family, in config order)
into a `Plan`: a finite tuple of possible answers (`variants`) and a `pick` that chooses one per query.
The control plane builds plans when health changes; the query path only calls `pick`, which must be
cheap, must not block and must take all chance from the `rng` it is given and all order from `seq`
(a per-name query counter kept by the caller). Compiling the variants to wire bytes once is what makes
the fast path fast, and sharing `pick` between the fast and the slow path is what keeps them equal.

Clients are passed as an integer address and a family flag so that no object is built per query.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gslbd.model.service import Endpoint, Service
from gslbd.model.topology import Locality, SiteInfo


@dataclass(frozen=True, slots=True)
class Client:
    """The address a client is located by (ECS address or packet source) as an int plus family."""

    ip: int
    v6: bool

    @classmethod
    def parse(cls, text: str) -> Client:
        addr = ipaddress.ip_address(text)
        return cls(int(addr), addr.version == 6)

    def text(self) -> str:
        return str(ipaddress.IPv6Address(self.ip) if self.v6 else ipaddress.IPv4Address(self.ip))


@dataclass(frozen=True, slots=True)
class Location:
    """Where a client is, and how that was found out (`how` is for `gslbd explain`)."""

    site: str | None = None
    locality: Locality = Locality()
    coordinates: tuple[float, float] | None = None
    how: str = "unknown"
    country: str | None = None  # ISO 3166 code, from the GeoIP database
    continent: str | None = None  # two-letter continent code, from the GeoIP database
    asn: int | None = None  # from the ASN database (topology.geoip.asn_database)


class Locator(Protocol):
    """Finds a client's location: topology networks (longest prefix) first, then GeoIP."""

    def locate(self, ip: int, v6: bool) -> Location: ...


class NoLocator:
    """A locator that knows nothing: every client is of unknown location."""

    def locate(self, ip: int, v6: bool) -> Location:
        return Location()


@dataclass(frozen=True, slots=True)
class PolicyEnv:
    """What a policy may use besides the candidates: the locator, the known sites, and a random
    source for decisions made once at plan time (never the query-time rng)."""

    locator: Locator
    sites: Mapping[str, SiteInfo]
    rng: random.Random


class Plan(Protocol):
    """Possible answers for one question and how to choose among them per query."""

    @property
    def variants(self) -> tuple[tuple[Endpoint, ...], ...]:
        """Every possible answer, each an ordered tuple of endpoints (never empty)."""
        ...

    @property
    def location_dependent(self) -> bool:
        """True when the choice depends on the client (ECS scope = source prefix), else False."""
        ...

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        """The index into `variants` for this query."""
        ...

    def explain(self, ip: int, v6: bool) -> list[str]:
        """Lines saying why this client gets what it gets (for `gslbd explain`)."""
        ...


class Policy(Protocol):
    """A named policy: builds a plan from the candidates of one question. Candidates are non-empty."""

    name: str

    def plan(self, candidates: tuple[Endpoint, ...], service: Service, env: PolicyEnv) -> Plan: ...


@dataclass(frozen=True, slots=True)
class FixedPlan:
    """One answer for everybody (used when a policy's choice cannot vary, and by all_down)."""

    answer: tuple[Endpoint, ...]
    reason: str = "a single possible answer"

    @property
    def variants(self) -> tuple[tuple[Endpoint, ...], ...]:
        return (self.answer,)

    @property
    def location_dependent(self) -> bool:
        return False

    def pick(self, ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        return 0

    def explain(self, ip: int, v6: bool) -> list[str]:
        return [self.reason]
