"""What a change does to real traffic, from the answers of each replayed query before and after it
(`gslbd whatif`). Pure: no config, no DNS; app/whatif.py replays and fills in the `Replayed` values.

    compare([Replayed, ...]) -> Report     shares of queries, client networks and services whose answer
                                           changes, and the answers per site before and after
    report_lines(report) / report_json(report)

An answer is its rcode and its answer records (owner, type, data), ignoring their order and TTLs: a
client that gets the same endpoints in another order gets the same answer. The load of a site is the
number of endpoints of that site in the answers (an answer with two endpoints of eu counts 2 for eu).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

V4_NETWORK = 24  # a client network: the /24 of an IPv4 client, the /56 of an IPv6 one
V6_NETWORK = 56
DROPPED = -1  # the rcode of a query that gets no response


@dataclass(frozen=True, slots=True)
class Answer:
    rcode: int
    records: frozenset[tuple[str, str, str]]  # (owner, type, data)
    sites: tuple[str, ...] = ()  # the site of each endpoint answered


@dataclass(frozen=True, slots=True)
class Replayed:
    network: str  # client_network() of the querier
    service: str | None  # the service asked for, None when the name is no service's
    before: Answer
    after: Answer

    @property
    def changed(self) -> bool:
        return self.before.rcode != self.after.rcode or self.before.records != self.after.records


@dataclass(frozen=True, slots=True)
class Share:
    changed: int
    total: int

    @property
    def fraction(self) -> float:
        return self.changed / self.total if self.total else 0.0

    def text(self) -> str:
        return f"{self.changed} of {self.total} ({self.fraction:.1%})"


@dataclass(frozen=True, slots=True)
class Report:
    queries: Share
    networks: Share
    services: Share
    load_before: dict[str, int] = field(default_factory=dict)
    load_after: dict[str, int] = field(default_factory=dict)
    changed_services: tuple[str, ...] = ()


def client_network(ip: int, v6: bool) -> str:
    """The network a client is counted in: its /24 (IPv4) or /56 (IPv6)."""
    if v6:
        return str(ipaddress.IPv6Network((ip, 128)).supernet(new_prefix=V6_NETWORK))
    return str(ipaddress.IPv4Network((ip, 32)).supernet(new_prefix=V4_NETWORK))


def compare(replayed: Iterable[Replayed]) -> Report:
    queries = changed_queries = 0
    networks: dict[str, bool] = {}
    services: dict[str, bool] = {}
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    for one in replayed:
        queries += 1
        changed = one.changed
        changed_queries += changed
        networks[one.network] = networks.get(one.network, False) or changed
        if one.service is not None:
            services[one.service] = services.get(one.service, False) or changed
        for site in one.before.sites:
            before[site] = before.get(site, 0) + 1
        for site in one.after.sites:
            after[site] = after.get(site, 0) + 1
    return Report(
        queries=Share(changed_queries, queries),
        networks=Share(sum(networks.values()), len(networks)),
        services=Share(sum(services.values()), len(services)),
        load_before=before,
        load_after=after,
        changed_services=tuple(sorted(name for name, changed in services.items() if changed)),
    )


def _sites(report: Report) -> list[str]:
    return sorted({*report.load_before, *report.load_after})


def report_lines(report: Report) -> list[str]:
    lines = [
        f"queries whose answer changes: {report.queries.text()}",
        f"client networks (/{V4_NETWORK}, /{V6_NETWORK}) with a changed answer: {report.networks.text()}",
        f"services whose answer changes: {report.services.text()}",
    ]
    lines += [f"  {name}" for name in report.changed_services]
    sites = _sites(report)
    if not sites:
        return [*lines, "load per site: no endpoint answered before or after"]
    width = max(len("site"), *(len(s) for s in sites))
    total_before = sum(report.load_before.values())
    total_after = sum(report.load_after.values())
    lines.append("load per site (endpoints answered):")
    lines.append(f"  {'site':<{width}}  {'before':>14}  {'after':>14}")
    for site in sites:
        b, a = report.load_before.get(site, 0), report.load_after.get(site, 0)
        lines.append(f"  {site:<{width}}  {_count(b, total_before):>14}  {_count(a, total_after):>14}")
    return lines


def _count(n: int, total: int) -> str:
    return f"{n} ({n / total:.1%})" if total else str(n)


def _share(share: Share) -> dict[str, Any]:
    return {"changed": share.changed, "total": share.total, "share": round(share.fraction, 6)}


def report_json(report: Report) -> dict[str, Any]:
    return {
        "queries": _share(report.queries),
        "client_networks": _share(report.networks),
        "services": {**_share(report.services), "changed_names": list(report.changed_services)},
        "load": {
            site: {"before": report.load_before.get(site, 0), "after": report.load_after.get(site, 0)}
            for site in _sites(report)
        },
    }
