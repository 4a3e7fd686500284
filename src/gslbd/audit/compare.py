"""Which answers differ between sites, beyond what the policies' randomness and the exchange's
staleness allow. Pure: no sockets, no clock.

Every site's answer to a question is the SET of records it gave over all the times it was asked (its
rcode instead when it gave none, or "no reply"), so round-robin, random and weighted orders and subsets
compare equal once asked a few times. A question whose sets differ between this site and a peer is a
divergence; one seen in two passes a staleness bound apart (`confirmed`) is reported, so a change still
on its way between the sites is not."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gslbd.audit.plan import Question

Answer = frozenset[str]  # "A 192.0.2.1", "CNAME app.example.net.", or one of "NXDOMAIN", "no reply", ...
Answers = Mapping[Question, Mapping[str, Answer]]  # question -> site -> what it answered


@dataclass(frozen=True, slots=True)
class Divergence:
    """`peer` answered `question` with `theirs` where this site (`reference`) answered `ours`."""

    question: Question
    reference: str
    peer: str
    ours: Answer
    theirs: Answer


def _order(d: Divergence) -> tuple[str, str, bool, str, str]:
    """By service, type, client network (the question without ECS first) and peer."""
    q = d.question
    return (q.service, q.rtype, q.network is not None, q.network or "", d.peer)


def compare(reference: str, answers: Answers) -> list[Divergence]:
    """Every (question, peer) whose answer set is not the reference site's, sorted."""
    found = []
    for question, by_site in answers.items():
        ours = by_site.get(reference)
        if ours is None:
            continue
        found += [
            Divergence(question, reference, site, ours, theirs)
            for site, theirs in by_site.items()
            if site != reference and theirs != ours
        ]
    return sorted(found, key=_order)


def confirmed(first: Iterable[Divergence], second: Iterable[Divergence]) -> list[Divergence]:
    """The divergences of the second pass that the first pass saw too (for the same question and peer),
    as the second pass saw them: what is left once the staleness bound has passed."""
    seen = {(d.question, d.peer) for d in first}
    return sorted((d for d in second if (d.question, d.peer) in seen), key=_order)


def divergent_services(divergences: Iterable[Divergence], peers: Iterable[str]) -> dict[str, int]:
    """For each peer: how many services it answers differently (0 for a peer that agrees)."""
    services: dict[str, set[str]] = {peer: set() for peer in peers}
    for d in divergences:
        services.setdefault(d.peer, set()).add(d.question.service)
    return {peer: len(names) for peer, names in services.items()}
