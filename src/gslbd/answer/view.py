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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Protocol

from gslbd.answer.delays import apply_holds
from gslbd.answer.min_healthy import above_threshold
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Zone
from gslbd.policy import Plan, PolicyEnv, plan_service
from gslbd.policy.load import apply_load, shed_plan, uses_load
from gslbd.policy.scope import plan_scope
from gslbd.state.snapshot import Snapshot, effective_up
from gslbd.types import AdminState, AllDown, EndpointKind, Rcode

# The types a service name answers from its endpoints.
SERVICE_TYPES = ("A", "AAAA", "CNAME")
_FAMILY_KIND = {"A": EndpointKind.IPV4, "AAAA": EndpointKind.IPV6}
_DOWN = AdminState.DOWN


@dataclass(frozen=True, slots=True)
class Rr:
    """One resource record in presentation form."""

    name: str
    rtype: str
    ttl: int
    rdata: str


@dataclass(frozen=True, slots=True)
class Referral:
    """The answer at and below a zone cut (a static NS set below the apex, RFC 1034 4.3.2 step 3b):
    not authoritative, the cut's NS set in authority and its in-bailiwick glue (the static A/AAAA
    records of its nameservers below the cut) in additional. `ds`: the cut's static DS RRset, which
    a DO query of a signed zone gets after the NS set (signed); without one it gets the NSEC of the
    cut proving there is none (RFC 4035 3.1.4), with TTL `nsec_ttl`. NS and glue are never signed."""

    cut: str
    ns: tuple[Rr, ...]
    glue: tuple[Rr, ...] = ()
    ds: tuple[Rr, ...] = ()
    nsec_ttl: int = 0

    @property
    def reason(self) -> str:
        return f"delegated: referral to the NS set of {self.cut}"


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer model, independent of the wire format."""

    rcode: int
    answer: tuple[Rr, ...] = ()
    authority: tuple[Rr, ...] = ()
    additional: tuple[Rr, ...] = ()
    authoritative: bool = True
    location_dependent: bool = False
    # An Extended DNS Error (RFC 8914) as (INFO-CODE, EXTRA-TEXT); sent only to queries with EDNS.
    ede: tuple[int, str] | None = None
    # A referral (the NS set in authority, glue in additional): what a DO query adds (DS or NSEC).
    referral: Referral | None = None
    # A CNAME/DNAME chain that ends in NXDOMAIN or NODATA: (its last name, the types there; () when it
    # does not exist), which a signed answer proves with that name's NSEC.
    denied: tuple[str, tuple[str, ...]] | None = None
    # The ECS scope of a location-dependent answer (policy/scope.py plan_scope); None: the whole address
    # (a CNAME chain through several policies), so the source prefix is echoed.
    scope: int | None = None

    @property
    def ecs_scope(self) -> int:
        """The prefix length this answer depends on, before the cap at the source prefix."""
        if not self.location_dependent:
            return 0
        return 128 if self.scope is None else self.scope


# Extended DNS Errors gslbd sends (RFC 8914 section 4; the choices are explained in docs/wire.md).
EDE_OTHER = 0
EDE_PROHIBITED = 18
EDE_NOT_AUTHORITATIVE = 20
# all_down: servfail. No RFC 8914 code says "the service's endpoints are all unhealthy" (22 No Reachable
# Authority and 23 Network Error describe a resolver failing to reach servers); Other with a text does.
EDE_ALL_DOWN = (EDE_OTHER, "no healthy endpoint")
NOT_AUTHORITATIVE = (EDE_NOT_AUTHORITATIVE, "")
TRANSFER_PROHIBITED = (EDE_PROHIBITED, "zone transfers are not served")


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


PickFn = Callable[[int, bool, random.Random, int], int]


@dataclass(frozen=True, slots=True)
class Chain:
    """An in-zone CNAME chain followed (RFC 1034 4.3.2, answer/chain.py): every possible answer,
    and `pick` choosing one per query like a plan (None when there is one answer). `service` is the
    service whose policy decides first (None for a static CNAME)."""

    answers: tuple[Answer, ...]
    pick: PickFn | None
    location_dependent: bool
    reason: str
    service: Service | None = None

    def answer(self, ip: int, v6: bool, rng: random.Random, seq: int) -> Answer:
        index = self.pick(ip, v6, rng, seq) if self.pick is not None else 0
        answer = self.answers[index]
        if answer.location_dependent and answer.scope is None:
            # the scope of the one policy the chain passes through (its pick is that plan's), as the
            # compiled tables take it (wire/fastpath.py); through several, the whole address
            answer = replace(answer, scope=plan_scope(getattr(self.pick, "__self__", None), ip, v6))
        return answer


Outcome = Records | Negative | Dynamic | Chain | Referral
# Question types for which a CNAME is the answer itself and is never followed.
UNFOLLOWED_TYPES = frozenset(("CNAME", "ANY", "SOA", "NS"))


@dataclass(slots=True)
class NameData:
    """Everything known about one existing name: its outcome per type, and what ANY answers."""

    name: str
    zone: Zone
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    service: Service | None = None
    # The outcomes with in-zone CNAME chains followed (answer/chain.py), by type; "" stands for every
    # type not listed. None when no answer here starts with a CNAME into our zones.
    chained: dict[str, Outcome] | None = None
    # The referral of the zone cut at or above this name (the cut itself, its glue names and the empty
    # non-terminals between): every type answers it, but DS at the cut (the parent's own data).
    referral: Referral | None = None

    def outcome(self, rtype: str) -> Outcome:
        """The outcome for a type at this name (NODATA when it has none), chains followed."""
        if self.referral is not None:
            return self.raw_outcome(rtype)
        chained = self.chained
        if chained is not None and rtype not in UNFOLLOWED_TYPES:
            found = chained.get(rtype)
            return found if found is not None else chained[""]
        return self.raw_outcome(rtype)

    def special_types(self) -> tuple[str, ...]:
        """The types this name answers otherwise than its default (every other type)."""
        if self.referral is not None:  # every type is the referral, but DS at the cut
            return ("DS",) if self.name == self.referral.cut else ()
        if self.chained is None:
            return tuple(self.outcomes)
        return tuple(dict.fromkeys((*self.outcomes, *(t for t in self.chained if t))))

    def raw_outcome(self, rtype: str) -> Outcome:
        """The outcome of this name alone: a CNAME is not followed."""
        referral = self.referral
        if referral is not None:
            if rtype == "DS" and self.name == referral.cut:
                return self.outcomes.get("DS") or Negative(Rcode.NOERROR)
            return referral
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


def negative_soa_ttl(zone: Zone) -> int:
    """The TTL of the SOA in a negative answer (RFC 2308 section 3): the smaller of the SOA record's
    own TTL (the zone's `ttl`) and its MINIMUM field, and at most the zone's `negative_ttl` (the MINIMUM
    field is at least 300 for zonemaster; the negative TTL is its own key)."""
    return min(zone.ttl, zone.soa.minimum, zone.negative_ttl)


def negative_soa(zone: Zone) -> Rr:
    """The SOA record that goes in the authority section of an NXDOMAIN or NODATA answer."""
    return soa_rr(zone, negative_soa_ttl(zone))


def family_candidates(endpoints: Iterable[Endpoint], rtype: str) -> tuple[Endpoint, ...]:
    """Endpoints that can answer a question of `rtype`: that address family, plus hostnames (CNAME)."""
    if rtype == "CNAME":
        return tuple(e for e in endpoints if e.kind is EndpointKind.HOSTNAME)
    kind = _FAMILY_KIND[rtype]
    return tuple(e for e in endpoints if e.kind is kind or e.kind is EndpointKind.HOSTNAME)


@lru_cache(maxsize=4096)
def _healthy_of(healthy: int, total: int) -> str:
    """One string per count pair, shared by every outcome that says it."""
    return f"{healthy} of {total} candidates healthy"


def service_outcome(
    service: Service,
    rtype: str,
    endpoints: tuple[Endpoint, ...],
    snapshot: Snapshot,
    env: PolicyEnv,
) -> Outcome:
    """The outcome of one service for one type: the policy over healthy candidates (those of the sites at
    or above `min_healthy`, when it is set), or all_down."""
    family = family_candidates(endpoints, rtype)
    if not family:
        return Negative(Rcode.NOERROR, f"{service.name} has no {rtype} endpoints")
    healthy = tuple(e for e in family if effective_up(e, snapshot))
    reason = _healthy_of(len(healthy), len(family))
    if healthy and service.min_healthy is not None:  # answer/min_healthy.py: sites below it count as failed
        configured = family_candidates(service.endpoints, rtype)
        healthy, why = above_threshold(service, family, healthy, configured)
        reason = f"{reason}; {why}" if why else reason
    holds = snapshot.holds.get(service.name) if snapshot.holds else None
    if holds:  # answer/delays.py: failover_delay / failback_delay hold a site's answer
        healthy, why = apply_holds(healthy, family, holds, lambda e: snapshot.admin_state(e) is not _DOWN)
        reason = f"{reason}; {why}" if why else reason
    if healthy and uses_load(service):  # policy/load.py: weights from load, shed_load
        applied = apply_load(service, healthy, snapshot.loads)
        healthy, reason = applied.candidates, f"{reason}; {applied.note}" if applied.note else reason
        if applied.factors is not None:
            shed = shed_plan(healthy, applied.factors, lambda members: plan_service(members, service, env))
            return Dynamic(service, rtype, shed, reason)
    if healthy:
        plan = plan_service(healthy, service, env)
        return Dynamic(service, rtype, plan, reason)
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
        plan = plan_service(allowed, service, env)
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


def _family_addresses(outcome: Outcome, rtype: str, max_answers: int) -> tuple[tuple[str, ...], ...]:
    """The addresses of `rtype` each possible answer of `outcome` gives (one tuple per variant)."""
    if isinstance(outcome, Dynamic):
        out: list[tuple[str, ...]] = []
        for variant in outcome.plan.variants:
            if variant[0].kind is EndpointKind.HOSTNAME:
                out.append(())
            else:
                out.append(tuple(e.address for e in variant if e.rtype == rtype)[:max_answers])
        return tuple(out)
    if isinstance(outcome, Records):
        return (tuple(rr.rdata for rr in outcome.answer if rr.rtype == rtype),)
    return ((),)


def https_outcome(service: Service, a: Outcome, aaaa: Outcome) -> Outcome:
    """The HTTPS record (RFC 9460) of a service with `https`: ServiceMode, target "." (the name itself),
    alpn and port as configured, ipv4hint/ipv6hint = the addresses the A and AAAA answers give the
    same client (both plans pick, as they do for A and AAAA; hints are sorted, so that variants that
    differ only in order are one). all_down's NXDOMAIN and SERVFAIL answer HTTPS alike."""
    spec = service.https
    assert spec is not None
    both_negative = isinstance(a, Negative) and isinstance(aaaa, Negative)
    for negative in (a, aaaa):
        if both_negative and isinstance(negative, Negative) and negative.rcode != Rcode.NOERROR:
            return negative
    v4 = _family_addresses(a, "A", service.max_answers)
    v6 = _family_addresses(aaaa, "AAAA", service.max_answers)
    params = []
    if spec.alpn:
        params.append("alpn=" + ",".join(spec.alpn))
    if spec.port is not None:
        params.append(f"port={spec.port}")
    answers: list[Answer] = []
    index: dict[Answer, int] = {}
    table = []
    dependent = any(isinstance(o, Dynamic) and o.plan.location_dependent for o in (a, aaaa))
    for four in v4:
        for six in v6:
            hints = list(params)
            if four:
                hints.append("ipv4hint=" + ",".join(sorted(set(four))))
            if six:
                hints.append("ipv6hint=" + ",".join(sorted(set(six))))
            text = " ".join(["1", ".", *hints])
            answer = Answer(
                Rcode.NOERROR,
                answer=(Rr(service.name, "HTTPS", service.ttl, text),),
                location_dependent=dependent,
            )
            table.append(index.setdefault(answer, len(index)))
            if len(answers) < len(index):
                answers.append(answer)
    pick_a = a.plan.pick if isinstance(a, Dynamic) else None
    pick_aaaa = aaaa.plan.pick if isinstance(aaaa, Dynamic) else None
    width = len(v6)
    slots = tuple(table)

    def pick(ip: int, v6_: bool, rng: random.Random, seq: int) -> int:
        i = pick_a(ip, v6_, rng, seq) if pick_a is not None else 0
        j = pick_aaaa(ip, v6_, rng, seq) if pick_aaaa is not None else 0
        return slots[i * width + j]

    chooses = pick_a is not None or pick_aaaa is not None
    return Chain(
        tuple(answers),
        pick if chooses else None,
        dependent,
        f"HTTPS record with the hints of the A and AAAA answers ({len(answers)} possible)",
        service,
    )


def srv_outcome(service: Service, endpoints: tuple[Endpoint, ...], snapshot: Snapshot) -> Outcome:
    """SRV records of a service with `srv`: one per healthy hostname endpoint (its priority and
    weight), and one for the healthy address endpoints together, whose target is the service name
    itself (its A/AAAA answer then picks among them by the service's policy): priority the lowest of
    theirs, weight their sum. NODATA when nothing is healthy."""
    spec = service.srv
    assert spec is not None
    healthy = [e for e in endpoints if effective_up(e, snapshot)]
    records = []
    addresses = [e for e in healthy if e.kind is not EndpointKind.HOSTNAME]
    if addresses:
        priority = min(e.priority for e in addresses)
        weight = min(sum(e.weight for e in addresses), 65535)
        records.append(Rr(spec.name, "SRV", service.ttl, f"{priority} {weight} {spec.port} {service.name}"))
    for e in healthy:
        if e.kind is EndpointKind.HOSTNAME:
            rdata = f"{min(e.priority, 65535)} {min(e.weight, 65535)} {spec.port} {e.address}"
            records.append(Rr(spec.name, "SRV", service.ttl, rdata))
    if not records:
        return Negative(Rcode.NOERROR, f"{service.name} has no healthy endpoint for SRV")
    return Records(tuple(dict.fromkeys(records)))


def wildcard_at(answer: Answer, wildcard: str, qname: str) -> Answer:
    """An answer of the wildcard name `wildcard` synthesized for `qname` (RFC 4592): records owned by
    the wildcard are owned by the question's name."""

    def owned(rrs: tuple[Rr, ...]) -> tuple[Rr, ...]:
        return tuple(Rr(qname, rr.rtype, rr.ttl, rr.rdata) if rr.name == wildcard else rr for rr in rrs)

    return replace(answer, answer=owned(answer.answer), additional=owned(answer.additional))


class DeferredNames(Protocol):
    """The names of services a large view has not built yet (answer/build.py `Deferred`): each one is
    made when it is first asked for, exactly as a whole build would have made it."""

    @property
    def services(self) -> Mapping[str, Service]:
        """The deferred services by name."""
        ...

    def node(self, name: str) -> NameData | None:
        """The node of `name` when a deferred service owns it, else None."""
        ...


def closest_encloser(get: Callable[[str], NameData | None], qname: str, origin: str) -> NameData | None:
    """The longest existing ancestor (by `get`) of the nonexistent `qname` of zone `origin` (RFC
    4592), or None when none exists (a view without the apex)."""
    name = qname
    while name not in (origin, "."):
        name = name[name.find(".") + 1 :] or "."
        found = get(name)
        if found is not None:
            return found
    return None


@dataclass(slots=True)
class View:
    """Every name of every served zone with its outcomes. Built by the control plane; read-only after.

    `names` holds every name built; a large view's first builds leave some services' names out
    (`deferred`, built in steps afterwards): ask `get` for a name, not `names`, unless the caller
    means the built names only (the wire compiler)."""

    zones: dict[str, Zone]
    names: Mapping[str, NameData]
    config: Config
    snapshot: Snapshot
    deferred: DeferredNames | None = None

    def get(self, name: str) -> NameData | None:
        """The node of `name` (absolute, lower case), built or deferred; None when it does not exist."""
        data = self.names.get(name)
        if data is None and self.deferred is not None:
            return self.deferred.node(name)
        return data

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

    def wildcard(self, qname: str, origin: str) -> NameData | None:
        """The wildcard node that answers the nonexistent `qname` of zone `origin` (RFC 4592: `*.` of
        the closest encloser, the longest existing ancestor), or None."""
        name = qname
        while name not in (origin, "."):
            name = name[name.find(".") + 1 :] or "."
            if name == origin or self.get(name) is not None:
                return self.get("*." + name)
        return None

    def resolve(self, qname: str, rtype: str, ip: int, v6: bool, rng: random.Random, seq: int) -> Answer:
        """The answer to one question from a client located at (ip, v6)."""
        data = self.get(qname)
        if data is None:
            zone = self.find_zone(qname)
            if zone is None:
                return Answer(Rcode.REFUSED, authoritative=False, ede=NOT_AUTHORITATIVE)
            encloser = self.encloser(qname, zone.origin)
            if encloser is not None and (encloser.referral is not None or "DNAME" in encloser.outcomes):
                from gslbd.answer.dname import beneath  # answer/dname.py follows chains (answer/chain.py)

                return beneath(self, encloser, qname, rtype, ip, v6, rng, seq)
            wild = self.wildcard(qname, zone.origin)
            if wild is not None:
                return wildcard_at(render(wild, wild.outcome(rtype), ip, v6, rng, seq), wild.name, qname)
            return Answer(Rcode.NXDOMAIN, authority=(negative_soa(zone),))
        return render(data, data.outcome(rtype), ip, v6, rng, seq)

    def encloser(self, qname: str, origin: str) -> NameData | None:
        """The closest encloser of the nonexistent `qname` of zone `origin` (answer/chain.py)."""
        return closest_encloser(self.get, qname, origin)


def render(data: NameData, outcome: Outcome, ip: int, v6: bool, rng: random.Random, seq: int) -> Answer:
    """Turn an outcome into an answer for one client."""
    zone = data.zone
    if isinstance(outcome, Records):
        return Answer(Rcode.NOERROR, answer=outcome.answer, additional=outcome.additional)
    if isinstance(outcome, Chain):
        return outcome.answer(ip, v6, rng, seq)
    if isinstance(outcome, Referral):
        return referral_answer(outcome)
    if isinstance(outcome, Negative):
        return (
            Answer(outcome.rcode, authority=(negative_soa(zone),))
            if outcome.rcode
            in (
                Rcode.NOERROR,
                Rcode.NXDOMAIN,
            )
            else Answer(outcome.rcode, ede=EDE_ALL_DOWN if outcome.rcode == Rcode.SERVFAIL else None)
        )
    index = outcome.plan.pick(ip, v6, rng, seq)
    dependent = outcome.plan.location_dependent
    return Answer(
        Rcode.NOERROR,
        answer=outcome.records(index),
        location_dependent=dependent,
        scope=plan_scope(outcome.plan, ip, v6) if dependent else None,
    )


def referral_answer(referral: Referral) -> Answer:
    """A referral's answer: NOERROR without AA, NS in authority, glue in additional (RFC 1034 4.3.2)."""
    return Answer(
        Rcode.NOERROR,
        authority=referral.ns,
        additional=referral.glue,
        authoritative=False,
        referral=referral,
    )
