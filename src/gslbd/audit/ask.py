"""Asking every site's nameservers the audit's questions over DNS (dns.asyncquery, UDP with TCP when
truncated), a bounded number at a time, and one audit run: a pass, and when something differs a second
pass of those questions once the staleness bound has passed (compare.confirmed)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass

import dns.asyncquery
import dns.edns
import dns.exception
import dns.message
import dns.rcode
import dns.rdatatype

from gslbd.audit.compare import Answer, Divergence, compare, confirmed, divergent_services
from gslbd.audit.plan import Question, questions
from gslbd.model.config import Config, ListenAddress

NO_REPLY = "no reply"
NODATA = "NODATA"
IN_FLIGHT = 32  # queries outstanding at once
PAYLOAD = 1232
_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # a listener on every address is asked here


@dataclass(frozen=True, slots=True)
class AuditSite:
    """A site and its nameservers, asked in order until one replies."""

    name: str
    servers: tuple[ListenAddress, ...]


@dataclass(frozen=True, slots=True)
class AuditResult:
    """One run: the site compared against (`reference`), every site asked, how many questions, and the
    divergences that outlived the staleness bound."""

    reference: str
    sites: tuple[str, ...]
    questions: int
    divergences: tuple[Divergence, ...]

    def per_peer(self) -> dict[str, int]:
        """How many services each peer answers differently."""
        return divergent_services(self.divergences, (s for s in self.sites if s != self.reference))


def audit_sites(config: Config, port: int = 53) -> list[AuditSite]:
    """The sites to compare, the reference first. With peers: this site (at its dns.listen addresses)
    and every peer site with nameservers. Without: every nameserver name of the zones that has addresses
    (asked on `port`), the first of them the reference."""
    if config.peers is not None and config.peers.sites:
        own = tuple(ListenAddress(_WILDCARD_HOSTS.get(a.host, a.host), a.port) for a in config.dns.listen)
        peers = [AuditSite(p.name, p.nameservers) for p in config.peers.sites if p.nameservers]
        return [AuditSite(config.site.name, own), *peers]
    found: dict[str, AuditSite] = {}
    for zone in config.zones:
        for ns in zone.nameservers:
            if ns.addresses and ns.name not in found:
                found[ns.name] = AuditSite(ns.name, tuple(ListenAddress(a, port) for a in ns.addresses))
    return list(found.values())


def settle_time(config: Config) -> float:
    """How long a change may take to reach every site: a poll interval and its timeout (0 without peers)."""
    return config.peers.interval + config.peers.timeout if config.peers is not None else 0.0


def _query(question: Question) -> dns.message.QueryMessage:
    options: list[dns.edns.Option] = []
    if question.network is not None:
        address, length = question.network.split("/")
        options.append(dns.edns.ECSOption(address, int(length)))
    return dns.message.make_query(question.name, question.rtype, use_edns=0, payload=PAYLOAD, options=options)


def answer_of(reply: dns.message.Message) -> Answer:
    """The records of a reply's answer section as "TYPE rdata" texts (signatures left out), else its
    rcode's name, or NODATA."""
    rcode = reply.rcode()
    if rcode != dns.rcode.NOERROR:
        return frozenset({dns.rcode.to_text(rcode)})
    records = {
        f"{dns.rdatatype.to_text(rrset.rdtype)} {rd.to_text()}"
        for rrset in reply.answer
        if rrset.rdtype != dns.rdatatype.RRSIG
        for rd in rrset
    }
    return frozenset(records) if records else frozenset({NODATA})


async def _ask_site(site: AuditSite, question: Question, timeout: float) -> Answer | None:
    for server in site.servers:
        try:
            reply, _ = await dns.asyncquery.udp_with_fallback(
                _query(question), server.host, timeout=timeout, port=server.port
            )
        except (dns.exception.DNSException, OSError):
            continue
        return answer_of(reply)
    return None


async def ask_all(
    sites: Sequence[AuditSite], asked: Sequence[Question], timeout: float
) -> dict[Question, dict[str, Answer]]:
    """Every site's answer set to every question (its records over `question.tries` askings)."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(site: AuditSite, question: Question) -> tuple[Question, str, Answer]:
        union: set[str] = set()
        for _ in range(question.tries):
            async with gate:
                got = await _ask_site(site, question, timeout)
            union |= got if got is not None else {NO_REPLY}
        return question, site.name, frozenset(union)

    results = await asyncio.gather(*(one(site, q) for q in asked for site in sites))
    answers: dict[Question, dict[str, Answer]] = {q: {} for q in asked}
    for question, name, answer in results:
        answers[question][name] = answer
    return answers


async def run_audit(
    config: Config,
    *,
    sample: int,
    rng: random.Random,
    timeout: float,
    settle: float,
    tries: int = 3,
    port: int = 53,
) -> AuditResult:
    """One audit run from `config`'s point of view (see the module docstring)."""
    sites = audit_sites(config, port)
    asked = questions(config, sample, rng, tries)
    if len(sites) < 2:
        return AuditResult(sites[0].name if sites else "", tuple(s.name for s in sites), len(asked), ())
    reference = sites[0].name
    found = compare(reference, await ask_all(sites, asked, timeout))
    if found and settle > 0:
        await asyncio.sleep(settle)
        again = list(dict.fromkeys(d.question for d in found))
        found = confirmed(found, compare(reference, await ask_all(sites, again, timeout)))
    return AuditResult(reference, tuple(s.name for s in sites), len(asked), tuple(found))
