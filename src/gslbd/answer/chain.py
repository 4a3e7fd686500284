"""In-zone CNAME chains, followed in the answer as authoritative servers do (RFC 1034 4.3.2).

A name whose answer is a CNAME (a static CNAME, a service whose chosen endpoint is a hostname, a
locality level pointing to a wider level, an all_down fallback hostname) gets, for every question
type but CNAME, ANY, SOA and NS, the CNAME followed by the answer of its target when the target lies
in one of our zones:

- an existing target answers what it answers to that type (its records, its policy's choice, a
  further CNAME, or NODATA with its zone's SOA);
- a target that does not exist in a served zone ends the chain with NXDOMAIN and that zone's SOA
  (RFC 6604: the rcode is the last name's);
- a target outside our zones, a loop, or a chain longer than `MAX_LINKS` CNAMEs ends with the
  CNAMEs alone (the resolver follows the rest);
- a target whose policy answers SERVFAIL (all_down: servfail) also ends with the CNAMEs alone:
  NOERROR, so that the resolver asks the target itself and gets its SERVFAIL there.

Every policy on the way picks as it would at its own name: the chain's `pick` asks the first policy,
then the policy of the target the chosen answer points to, and so on, so the possible answers are all
precompiled (wire/compile.py) and both paths pick alike.

`ChainIndex` keeps, per name holding a CNAME, the names its chains pass through, so that an update
of a few names refollows the chains that pass through them (answer/build.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from gslbd.answer.view import (
    EDE_ALL_DOWN,
    UNFOLLOWED_TYPES,
    Answer,
    Chain,
    Dynamic,
    NameData,
    Negative,
    Outcome,
    PickFn,
    Records,
    Referral,
    Rr,
    closest_encloser,
    negative_soa,
)
from gslbd.model.zone import Zone
from gslbd.types import EndpointKind, Rcode

MAX_LINKS = 8  # CNAMEs in one answer at most (Knot follows up to 20, BIND 16; 8 is plenty for GSLB)

FindZone = Callable[[str], Zone | None]


@dataclass(slots=True)
class _Walk:
    """One chain walk: the names visited and whether any target was looked up in our zones."""

    names: Mapping[str, NameData]
    find_zone: FindZone
    rtype: str
    visited: set[str] = field(default_factory=set)
    followed: bool = False
    dependent: bool = False
    reasons: list[str] = field(default_factory=list)


# A walk's result: the possible answers and the pick among them (None: one answer).
_Tree = tuple[list[Answer], PickFn | None]


def may_chain(data: NameData) -> bool:
    """Whether some answer at this name starts with a CNAME (then chains may need following)."""
    return any(_points(outcome) for outcome in data.outcomes.values())


def _points(outcome: Outcome) -> bool:
    if isinstance(outcome, Records):
        return _pointer(outcome.answer) is not None
    if isinstance(outcome, Dynamic):
        return any(v and v[0].kind is EndpointKind.HOSTNAME for v in outcome.plan.variants)
    return False


def _pointer(records: tuple[Rr, ...]) -> str | None:
    """The target when `records` is one CNAME (an answer to be followed), else None."""
    if len(records) == 1 and records[0].rtype == "CNAME":
        return records[0].rdata.lower()
    return None


def follow(
    data: NameData, rtype: str, names: Mapping[str, NameData], find_zone: FindZone
) -> tuple[Outcome, set[str]]:
    """The outcome of `rtype` at `data` with in-zone chains followed, and the names the chains pass
    through (targets, existing or not). The raw outcome itself when nothing is followed."""
    raw = data.raw_outcome(rtype)
    if rtype in UNFOLLOWED_TYPES or not _points(raw):
        return raw, set()
    walk = _Walk(names, find_zone, rtype, {data.name})
    answers, pick = _outcome_tree(walk, raw, data.zone, (), 0)
    visited = walk.visited - {data.name}
    if not walk.followed:
        return raw, visited
    service = raw.service if isinstance(raw, Dynamic) else None
    dependent = walk.dependent
    return (
        Chain(
            tuple(replace(a, location_dependent=dependent) for a in answers),
            pick,
            dependent,
            "; ".join(dict.fromkeys(walk.reasons)),
            service,
        ),
        visited,
    )


def _outcome_tree(
    walk: _Walk,
    outcome: Outcome,
    zone: Zone,
    chain: tuple[Rr, ...],
    links: int,
    owner: NameData | None = None,
) -> _Tree:
    if isinstance(outcome, Records):
        target = _pointer(outcome.answer)
        if target is not None:
            return _target_tree(walk, target, chain + outcome.answer, links + 1)
        return [Answer(Rcode.NOERROR, answer=chain + outcome.answer, additional=outcome.additional)], None
    if isinstance(outcome, Negative):
        return [_negative(outcome.rcode, zone, chain, owner)], None
    if isinstance(outcome, Referral):  # a target at or below a zone cut: the resolver follows
        return [_referred(chain, outcome)], None
    if isinstance(outcome, Chain):  # a precompiled answer set (an HTTPS record's): after the CNAMEs
        walk.dependent |= outcome.location_dependent
        return [replace(a, answer=chain + a.answer) for a in outcome.answers], outcome.pick
    plan = outcome.plan
    walk.dependent |= plan.location_dependent
    if links and outcome.reason:
        walk.reasons.append(outcome.reason)
    answers: list[Answer] = []
    offsets: list[int] = []
    subs: list[PickFn | None] = []
    for index in range(len(plan.variants)):
        records = outcome.records(index)
        target = _pointer(records)
        offsets.append(len(answers))
        if target is None:
            answers.append(Answer(Rcode.NOERROR, answer=chain + records))
            subs.append(None)
            continue
        found, sub = _target_tree(walk, target, chain + records, links + 1)
        answers.extend(found)
        subs.append(sub)
    return answers, _composite(plan.pick, tuple(offsets), tuple(subs))


def _composite(first: PickFn, offsets: tuple[int, ...], subs: tuple[PickFn | None, ...]) -> PickFn:
    if not any(subs):
        return first

    def pick(ip: int, v6: bool, rng: random.Random, seq: int) -> int:
        index = first(ip, v6, rng, seq)
        sub = subs[index]
        return offsets[index] + (sub(ip, v6, rng, seq) if sub is not None else 0)

    return pick


def _target_tree(walk: _Walk, target: str, chain: tuple[Rr, ...], links: int) -> _Tree:
    if target in walk.visited or links >= MAX_LINKS:  # a loop, or long enough
        return [Answer(Rcode.NOERROR, answer=chain)], None
    walk.visited.add(target)
    walk.reasons.append(f"CNAME to {target}")
    found = walk.names.get(target)
    if found is not None:
        walk.followed = True
        return _outcome_tree(walk, found.raw_outcome(walk.rtype), found.zone, chain, links, found)
    zone = walk.find_zone(target)
    if zone is not None:
        walk.followed = True
        encloser = closest_encloser(walk.names.get, target, zone.origin)
        if encloser is not None and encloser.referral is not None:  # delegated: the resolver follows
            return [_referred(chain, encloser.referral)], None
        dname = dname_record(encloser) if encloser is not None else None
        if dname is not None:  # RFC 6672: the DNAME, its synthesized CNAME, and on to the new name
            walk.reasons.append(f"DNAME {dname.name} to {dname.rdata}")
            cname = synthesized_cname(target, dname)
            if cname is None:
                return [Answer(Rcode.YXDOMAIN, answer=(*chain, dname))], None
            return _target_tree(walk, cname.rdata, (*chain, dname, cname), links + 1)
        denied = (target, ())  # a signed answer proves the name does not exist (wire/dnssec.py)
        return [Answer(Rcode.NXDOMAIN, answer=chain, authority=(negative_soa(zone),), denied=denied)], None
    return [Answer(Rcode.NOERROR, answer=chain)], None


def _referred(chain: tuple[Rr, ...], referral: Referral) -> Answer:
    """The CNAMEs to a name at or below a zone cut, then the cut's referral (NS in authority, glue in
    additional), as Knot and NSD answer; authoritative for the CNAMEs."""
    return Answer(
        Rcode.NOERROR, answer=chain, authority=referral.ns, additional=referral.glue, referral=referral
    )


def existing(data: NameData) -> tuple[str, ...]:
    """The types with data at a name now (what a NODATA proof lists there)."""
    return tuple(t for t, o in data.outcomes.items() if not isinstance(o, Negative))


def dname_record(data: NameData) -> Rr | None:
    """The static DNAME at this name, when it holds one (a DNAME RRset has one record)."""
    outcome = data.outcomes.get("DNAME")
    if isinstance(outcome, Records) and outcome.answer:
        return outcome.answer[0]
    return None


def synthesized_cname(qname: str, dname: Rr) -> Rr | None:
    """The CNAME a DNAME synthesizes for `qname` below its owner (RFC 6672 2.2: the owner's suffix
    replaced by the DNAME's target, TTL the DNAME's), or None when the new name is longer than 255
    octets (the answer is then YXDOMAIN)."""
    stem = qname[: len(qname) - len(dname.name)]
    target = dname.rdata.lower()
    new = stem + target if target != "." else stem
    if wire_length(new) > MAX_NAME_OCTETS:
        return None
    return Rr(qname, "CNAME", dname.ttl, new)


MAX_NAME_OCTETS = 255


def wire_length(name: str) -> int:
    """The length in wire form of an absolute name in presentation form (escapes counted as one octet)."""
    if name == ".":
        return 1
    octets = 1  # the root label
    i = 0
    while i < len(name):
        c = name[i]
        if c == "\\":
            i += 4 if name[i + 1 : i + 2].isdigit() else 2
        else:
            i += 1
        octets += 1  # a label's character, or the length byte standing for its dot
    return octets


def _negative(rcode: int, zone: Zone, chain: tuple[Rr, ...], owner: NameData | None) -> Answer:
    if rcode in (Rcode.NOERROR, Rcode.NXDOMAIN):
        denied = None
        if chain and owner is not None:  # the chain's last name: what a signed answer proves of it
            types = () if rcode == Rcode.NXDOMAIN else existing(owner)
            denied = (owner.name, types)
        return Answer(rcode, answer=chain, authority=(negative_soa(zone),), denied=denied)
    if chain:
        return Answer(Rcode.NOERROR, answer=chain)
    return Answer(rcode, ede=EDE_ALL_DOWN if rcode == Rcode.SERVFAIL else None)


def with_chains(
    data: NameData, names: Mapping[str, NameData], find_zone: FindZone
) -> tuple[NameData, set[str]]:
    """`data` with its chains followed for every type (a new node when any is; `data` itself when
    none is), and the names its chains pass through."""
    if not may_chain(data):
        if data.chained is None:
            return data, set()
        return NameData(data.name, data.zone, data.outcomes, data.service), set()
    chained: dict[str, Outcome] = {}
    visited: set[str] = set()
    todo = ["", *(t for t in data.outcomes if t not in UNFOLLOWED_TYPES)]
    while todo:
        rtype = todo.pop()
        if rtype in chained:
            continue
        chained[rtype], seen = follow(data, rtype, names, find_zone)
        for name in seen - visited:
            target = names.get(name)
            if target is not None:
                todo.extend(t for t in target.outcomes if t not in UNFOLLOWED_TYPES and t not in chained)
        visited |= seen
    if not any(isinstance(o, Chain) for o in chained.values()):
        if data.chained is None:
            return data, visited
        return NameData(data.name, data.zone, data.outcomes, data.service), visited
    return NameData(data.name, data.zone, data.outcomes, data.service, chained), visited


@dataclass(slots=True)
class ChainIndex:
    """Which names' chains pass through which names, for refollowing after an incremental build."""

    through: dict[str, set[str]] = field(default_factory=dict)  # target -> sources
    passes: dict[str, set[str]] = field(default_factory=dict)  # source -> targets

    def refollow(self, names: dict[str, NameData], sources: Iterable[str], find_zone: FindZone) -> set[str]:
        """Follow the chains of `sources` again in `names` (replacing their nodes); the names whose
        node was replaced."""
        replaced = self.refollow_map(names, sources, find_zone)
        names.update(replaced)
        return set(replaced)

    def refollow_map(
        self, names: Mapping[str, NameData], sources: Iterable[str], find_zone: FindZone
    ) -> dict[str, NameData]:
        """Follow the chains of `sources` again in `names` (left as it is: a chain reads the nodes it
        passes through as they are, never their followed chains); the new nodes by name."""
        replaced: dict[str, NameData] = {}
        for source in sources:
            for target in self.passes.pop(source, ()):
                users = self.through.get(target)
                if users is not None:
                    users.discard(source)
            data = names.get(source)
            if data is None:
                continue
            new, visited = with_chains(data, names, find_zone)
            if new is not data:
                replaced[source] = new
            if visited:
                self.passes[source] = visited
                for target in visited:
                    self.through.setdefault(target, set()).add(source)
        return replaced

    def affected(self, touched: Iterable[str]) -> set[str]:
        """The sources whose chains pass through any of `touched` (a chain reads the names it passes
        through as they are, never their own followed chains, so this is not transitive)."""
        out: set[str] = set()
        for name in touched:
            out.update(self.through.get(name, ()))
        return out


def follow_all(names: dict[str, NameData], find_zone: FindZone) -> ChainIndex:
    """Follow the chains of every name of `names` (in place) and index them."""
    index = ChainIndex()
    index.refollow(names, [n for n, d in names.items() if may_chain(d)], find_zone)
    return index
