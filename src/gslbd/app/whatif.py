"""Replaying a dnstap capture through two generations, offline (`gslbd whatif`).

    Replayer(resolved, snapshot, seed) the generation a server builds from them, answering through the
                                       server's own Responder, in process
    Replayer.for_config(config, admin, seed)   from a config with these run-time admin states (no
                                       verdicts: every endpoint as at a start)
    with_admin(snapshot, admin)        a running snapshot with a pending admin change
    replay(queries, current, candidate) -> [Replayed]   whatif_report.compare makes the figures
    admin_overrides(config, changes)   the admin states a list of `--admin` changes sets, in order

No socket is opened and no probe runs. Every query is answered by both generations with the same
random draws (a generator seeded from `seed` and the query's position), so a service the change does
not touch answers both the same; rate limiting and cookies (dns.rrl, dns.cookies) are not replayed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.rdatatype

from gslbd.app.generation import GenerationBuilder, Resolved, resolve
from gslbd.app.whatif_report import DROPPED, Answer, Replayed, client_network, compare, report_json
from gslbd.model.config import Config
from gslbd.model.selector import AdminChange
from gslbd.model.service import EndpointKey
from gslbd.server.dnstap.capture import TapQuery, read_queries
from gslbd.state.book import HealthBook
from gslbd.state.snapshot import Snapshot
from gslbd.types import AdminState
from gslbd.wire import Responder

_ENDPOINT_TYPES = {dns.rdatatype.A, dns.rdatatype.AAAA, dns.rdatatype.CNAME}
# SOA serials of zones without one come from the clock: both generations get the same.
_WALL = 1_700_000_000.0


class SelectorMatchesNothing(ValueError):
    pass


class NothingToReplay(LookupError):
    pass


def admin_overrides(config: Config, changes: Sequence[AdminChange]) -> dict[EndpointKey, AdminState]:
    """Every endpoint's admin state after `changes`, applied in order (a later change wins).
    SelectorMatchesNothing naming the first change that selects no endpoint of `config`."""
    out: dict[EndpointKey, AdminState] = {}
    for change in changes:
        keys = [e.key for s in config.services for e in s.endpoints if change.selector.matches(e)]
        if not keys:
            raise SelectorMatchesNothing(
                f"--admin '{change.selector.text()} {change.state.value}' "
                "selects no endpoint of the candidate config"
            )
        out.update((key, change.state) for key in keys)
    return out


def with_admin(snapshot: Snapshot, admin: Mapping[EndpointKey, AdminState]) -> Snapshot:
    """`snapshot` with these admin states on top of its own (a pending change)."""
    return replace(snapshot, admin={**snapshot.admin, **admin})


class Replayer:
    """Answers replayed queries from the generation built of `resolved` and `snapshot`; `for_config`
    builds it from a config alone, as a start without verdicts would."""

    def __init__(self, resolved: Resolved, snapshot: Snapshot, seed: int) -> None:
        generation = GenerationBuilder().first(resolved, snapshot)
        self._seed = seed
        self._responder = Responder(generation.table, generation.view, random.Random(seed), native=False)
        self._responder.guard = None
        config = resolved.config
        self.services = frozenset(s.name for s in config.services)
        self._sites: dict[tuple[str, str], str] = {}
        self._address_sites: dict[str, str] = {}
        # Responses read, by their bytes after the message ID: most repeat (parsing is most of the cost).
        self._read: dict[bytes, Answer] = {}
        peers = [e for endpoints in snapshot.peer_endpoints.values() for e in endpoints]
        for endpoint in [e for s in config.services for e in s.endpoints] + peers:
            self._sites[endpoint.key] = endpoint.site
            self._address_sites.setdefault(endpoint.address, endpoint.site)

    @classmethod
    def for_config(cls, config: Config, admin: Mapping[EndpointKey, AdminState], seed: int) -> Replayer:
        resolved = resolve(config, random.Random(seed), wall=_WALL)
        return cls(resolved, HealthBook(dict(admin)).snapshot(), seed)

    def answer(self, query: TapQuery, position: int) -> Answer:
        self._responder.rng = random.Random(self._seed * 1_000_003 + position)
        out = self._responder.handle(query.message, query.ip, query.v6, query.tcp)
        if out is None:
            return Answer(DROPPED, frozenset())
        key = out[2:]
        found = self._read.get(key)
        if found is None:
            found = self._read[key] = self._answer_of(out)
        return found

    def _answer_of(self, out: bytes) -> Answer:
        try:
            response = dns.message.from_wire(out, ignore_trailing=True)
        except dns.exception.DNSException:
            return Answer(DROPPED, frozenset())
        records: set[tuple[str, str, str]] = set()
        sites: list[str] = []
        for rrset in response.answer:
            owner = rrset.name.to_text().lower()
            for rdata in rrset:
                data = rdata.to_text().lower()
                records.add((owner, dns.rdatatype.to_text(rrset.rdtype), data))
                if rrset.rdtype in _ENDPOINT_TYPES:
                    site = self._sites.get((owner, data), self._address_sites.get(data))
                    if site is not None:
                        sites.append(site)
        return Answer(response.rcode(), frozenset(records), tuple(sorted(sites)))


def _question(message: bytes) -> str | None:
    try:
        query = dns.message.from_wire(message, ignore_trailing=True)
    except dns.exception.DNSException:
        return None
    return query.question[0].name.to_text().lower() if query.question else None


def replay(queries: Iterable[TapQuery], current: Replayer, candidate: Replayer) -> list[Replayed]:
    services = current.services | candidate.services
    names: dict[bytes, str | None] = {}  # question names by the query's bytes after its ID
    out: list[Replayed] = []
    for position, query in enumerate(queries):
        key = query.message[2:]
        if key in names:
            name = names[key]
        else:
            name = names[key] = _question(query.message)
        out.append(
            Replayed(
                network=client_network(query.ip, query.v6),
                service=name if name in services else None,
                before=current.answer(query, position),
                after=candidate.answer(query, position),
            )
        )
    return out


def capture_files(config: Config) -> list[str]:
    """The files of `log.dnstap.file` (one per worker process with dns.workers > 1); empty without."""
    tap = config.log.dnstap
    if tap is None or tap.file is None:
        return []
    if config.dns.workers > 1:
        return [f"{tap.file}.{n}" for n in range(1, config.dns.workers + 1)]
    return [tap.file]


def whatif_running(
    resolved: Resolved, snapshot: Snapshot, changes: Sequence[AdminChange], seed: int
) -> dict[str, Any]:
    """`gslbd whatif --json` for the running generation (`resolved`, `snapshot`, verdicts included)
    and the same with `changes` pending, over the server's own capture. SelectorMatchesNothing;
    NothingToReplay when there is no capture (or no query in it); CaptureError for a broken one."""
    files = capture_files(resolved.config)
    if not files:
        raise NothingToReplay("log.dnstap.file is not set: this server keeps no capture to replay")
    admin = admin_overrides(resolved.config, changes)
    queries = [q for path in files if Path(path).exists() for q in read_queries(path)]
    if not queries:
        raise NothingToReplay(f"no queries in {', '.join(files)} yet (log.dnstap.queries must be true)")
    before = Replayer(resolved, snapshot, seed)
    after = Replayer(resolved, with_admin(snapshot, admin), seed)
    return {"replayed": len(queries), **report_json(compare(replay(queries, before, after)))}
