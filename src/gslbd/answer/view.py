"""Pure resolution: from the configuration and a health snapshot to the answer for any question.

`build_view` (answer/build.py) runs in the control plane whenever config or health changes. It
decides, for every name of every served zone and every type, what the answer is: static records, a
negative answer, or a policy `Plan` whose variants are the possible answers. `View.resolve` then
answers one question; it is the slow path's and `gslbd explain`'s answer, and the wire compiler turns
the same view into the fast path's tables, so both paths answer from one set of decisions.

Names are absolute, lower case text ("app.gslb.example.com."); types are mnemonics ("A", "AAAA").
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gslbd.model.config import Config
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Zone
from gslbd.policy import Plan, PolicyEnv, get_policy
from gslbd.state.snapshot import Snapshot, effective_up
from gslbd.types import AdminState, AllDown, EndpointKind, Rcode

# The types a service name answers from its endpoints.
SERVICE_TYPES = ("A", "AAAA", "CNAME")
_FAMILY_KIND = {"A": EndpointKind.IPV4, "AAAA": EndpointKind.IPV6}


@dataclass(frozen=True, slots=True)
class Rr:
    """One resource record in presentation form."""

    name: str
    rtype: str
    ttl: int
    rdata: str


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer model, independent of the wire format."""

    rcode: int
    answer: tuple[Rr, ...] = ()
    authority: tuple[Rr, ...] = ()
    additional: tuple[Rr, ...] = ()
    authoritative: bool = True
    location_dependent: bool = False


@dataclass(frozen=True, slots=True)
class Records:
    """A fixed positive answer (static records, or fallback addresses)."""

    answer: tuple[Rr, ...]
    additional: tuple[Rr, ...] = ()


@dataclass(frozen=True, slots=True)
class Negative:
    """A fixed negative answer at an existing name: NODATA, or all_down's NXDOMAIN/SERVFAIL."""

    rcode: int  # Rcode.NOERROR means NODATA
    reason: str = "no data of this type"


@dataclass(frozen=True, slots=True)
class Dynamic:
    """A policy's answer: the plan's picked variant rendered as records of `rtype`."""

    service: Service
    rtype: str
    plan: Plan
    reason: str = ""

    def records(self, index: int) -> tuple[Rr, ...]:
        return variant_records(self.service, self.plan.variants[index], self.rtype)


Outcome = Records | Negative | Dynamic


@dataclass(slots=True)
class NameData:
    """Everything known about one existing name: its outcome per type, and what ANY answers."""

    name: str
    zone: Zone
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    service: Service | None = None

    def outcome(self, rtype: str) -> Outcome:
        """The outcome for a type at this name (NODATA when it has none)."""
        found = self.outcomes.get(rtype)
        if found is not None:
            return found
        if rtype == "ANY":
            return self.any_outcome()
        cname = self.outcomes.get("CNAME")
        if cname is not None and not isinstance(cname, Negative) and rtype not in ("SOA", "NS"):
            return cname
        return Negative(Rcode.NOERROR)

    def any_outcome(self) -> Outcome:
        """RFC 8482: a minimal answer to ANY, one RRset that exists here (or NODATA)."""
        for rtype in ("A", "AAAA", "CNAME", "SOA"):
            found = self.outcomes.get(rtype)
            if found is not None and not isinstance(found, Negative):
                return found
        for found in self.outcomes.values():
            if not isinstance(found, Negative):
                return found
        return Negative(Rcode.NOERROR)


def variant_records(service: Service, endpoints: tuple[Endpoint, ...], rtype: str) -> tuple[Rr, ...]:
    """Records for a chosen variant: a CNAME when it starts with a hostname, else its addresses."""
    first = endpoints[0]
    if first.kind is EndpointKind.HOSTNAME:
        return (Rr(service.name, "CNAME", service.ttl, first.address),)
    return tuple(Rr(service.name, rtype, service.ttl, e.address) for e in endpoints if e.rtype == rtype)[
        : service.max_answers
    ]


def soa_rr(zone: Zone, ttl: int) -> Rr:
    s = zone.soa
    return Rr(
        zone.origin,
        "SOA",
        ttl,
        f"{s.mname} {s.rname} {s.serial} {s.refresh} {s.retry} {s.expire} {s.minimum}",
    )


def family_candidates(endpoints: Iterable[Endpoint], rtype: str) -> tuple[Endpoint, ...]:
    """Endpoints that can answer a question of `rtype`: that address family, plus hostnames (CNAME)."""
    if rtype == "CNAME":
        return tuple(e for e in endpoints if e.kind is EndpointKind.HOSTNAME)
    kind = _FAMILY_KIND[rtype]
    return tuple(e for e in endpoints if e.kind is kind or e.kind is EndpointKind.HOSTNAME)


def service_outcome(
    service: Service,
    rtype: str,
    endpoints: tuple[Endpoint, ...],
    snapshot: Snapshot,
    env: PolicyEnv,
) -> Outcome:
    """The outcome of one service for one type: the policy over healthy candidates, or all_down."""
    family = family_candidates(endpoints, rtype)
    if not family:
        return Negative(Rcode.NOERROR, f"{service.name} has no {rtype} endpoints")
    healthy = tuple(e for e in family if effective_up(e, snapshot))
    if healthy:
        plan = get_policy(service.policy).plan(healthy, service, env)
        return Dynamic(service, rtype, plan, f"{len(healthy)} of {len(family)} candidates healthy")
    return all_down_outcome(service, rtype, family, snapshot, env)


def all_down_outcome(
    service: Service, rtype: str, family: tuple[Endpoint, ...], snapshot: Snapshot, env: PolicyEnv
) -> Outcome:
    """What `all_down` answers when no candidate of this family is healthy."""
    mode = service.all_down
    why = f"no healthy {rtype} candidates; all_down={mode.value}"
    if mode is AllDown.SERVE_ALL:
        allowed = tuple(e for e in family if snapshot.admin_state(e) is not AdminState.DOWN)
        if not allowed:
            return Negative(Rcode.NOERROR, why + ", but every endpoint is forced down by an admin")
        plan = get_policy(service.policy).plan(allowed, service, env)
        return Dynamic(service, rtype, plan, why)
    if mode is AllDown.NXDOMAIN:
        return Negative(Rcode.NXDOMAIN, why)
    if mode is AllDown.SERVFAIL:
        return Negative(Rcode.SERVFAIL, why)
    if mode is AllDown.NODATA:
        return Negative(Rcode.NOERROR, why)
    return fallback_outcome(service, rtype, why)


def fallback_outcome(service: Service, rtype: str, why: str) -> Outcome:
    """all_down: fallback -> the fallback addresses of the asked family, or a CNAME to the hostname."""
    hosts = [f for f in service.fallback if f.endswith(".")]
    if hosts:
        return Records((Rr(service.name, "CNAME", service.ttl, hosts[0]),))
    if rtype == "CNAME":
        return Negative(Rcode.NOERROR, why + ", no fallback hostname")
    want_v6 = rtype == "AAAA"
    addrs = [f for f in service.fallback if (":" in f) == want_v6]
    if not addrs:
        return Negative(Rcode.NOERROR, why + f", no {rtype} fallback")
    return Records(tuple(Rr(service.name, rtype, service.ttl, a) for a in addrs[: service.max_answers]))


@dataclass(slots=True)
class View:
    """Every name of every served zone with its outcomes. Built by the control plane; read-only after."""

    zones: dict[str, Zone]
    names: Mapping[str, NameData]
    config: Config
    snapshot: Snapshot

    def find_zone(self, qname: str) -> Zone | None:
        """The most specific served zone that contains `qname`."""
        name = qname
        while True:
            zone = self.zones.get(name)
            if zone is not None:
                return zone
            if name == ".":
                return None
            dot = name.find(".")
            name = name[dot + 1 :] or "."

    def resolve(self, qname: str, rtype: str, ip: int, v6: bool, rng: random.Random, seq: int) -> Answer:
        """The answer to one question from a client located at (ip, v6)."""
        data = self.names.get(qname)
        if data is None:
            zone = self.find_zone(qname)
            if zone is None:
                return Answer(Rcode.REFUSED, authoritative=False)
            return Answer(Rcode.NXDOMAIN, authority=(soa_rr(zone, zone.negative_ttl),))
        return render(data, data.outcome(rtype), ip, v6, rng, seq)


def render(data: NameData, outcome: Outcome, ip: int, v6: bool, rng: random.Random, seq: int) -> Answer:
    """Turn an outcome into an answer for one client."""
    zone = data.zone
    if isinstance(outcome, Records):
        return Answer(Rcode.NOERROR, answer=outcome.answer, additional=outcome.additional)
    if isinstance(outcome, Negative):
        return (
            Answer(outcome.rcode, authority=(soa_rr(zone, zone.negative_ttl),))
            if outcome.rcode
            in (
                Rcode.NOERROR,
                Rcode.NXDOMAIN,
            )
            else Answer(outcome.rcode)
        )
    index = outcome.plan.pick(ip, v6, rng, seq)
    return Answer(
        Rcode.NOERROR,
        answer=outcome.records(index),
        location_dependent=outcome.plan.location_dependent,
    )
