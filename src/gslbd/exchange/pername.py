"""Polling a peer name by name: what a peer without an exchange zone (k8gb, `peers.transfer: false`) is asked.

A poll asks the peer's heartbeat (`heartbeat-<peer>.<origin>` TXT, of the first zone) and then A and AAAA
of every service's `localtargets-<label>.<origin>`, all over one TCP connection per peer nameserver
(pipeline.py), kept open from poll to poll while the peer keeps it open. The heartbeat's round trip is the
peer's measured RTT (smoothed over polls, `gslbd_exchange_peer_rtt_seconds`); the questions are then kept
in flight `window_for(questions, rtt, interval / 4)` at a time: enough that the poll takes about a quarter of
the interval, and no more than that, so a peer next door is not sent thousands at once.

The nameserver that answered last is asked first. A question that fails (no reply within `peers.timeout`
of the last reply, a closed connection, an rcode other than NOERROR/NXDOMAIN, a reply that does not match)
is asked again at the next nameserver (at least two attempts in all: with one nameserver, over a new
connection); each failure counts as an error of the peer. NXDOMAIN means the peer has no endpoints for the
service. A poll in which some question got no answer at all raises PollFailed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gslbd.answer.exchange_names import heartbeat_name, localtargets_name
from gslbd.exchange.peerstate import PeerAnswer
from gslbd.exchange.pipeline import Outcome, TcpPipe, window_for
from gslbd.exchange.wireformat import AAAA, TXT, A, Question, Reply, question, rcode_text
from gslbd.metrics import PEER_RTT
from gslbd.model.config import Config, ListenAddress, PeerSite
from gslbd.model.tsig import TsigKey

NOERROR, NXDOMAIN = 0, 3
FIRST_RTT = 0.1  # seconds assumed before a peer's round trip is measured
RTT_GAIN = 0.25  # weight of a new round-trip sample in the smoothed RTT


class PollFailed(Exception):
    """A question of a poll got no usable answer from any of the peer's nameservers."""


class Tally:
    """The failed queries of one poll: how many, and the last one's description."""

    def __init__(self) -> None:
        self.errors = 0
        self.last_error = ""

    def _fail_name(self, server: ListenAddress, name: str, why: str) -> None:
        self.errors += 1
        self.last_error = f"{name} from {server}: {why}"


@dataclass(frozen=True, slots=True)
class Questions:
    """What every poll asks, built once per configuration. `heartbeats` holds one question per peer."""

    targets: tuple[tuple[str, Question], ...]  # (service fqdn, question) for A and AAAA
    heartbeat_zone: str | None
    zones: tuple[str, ...] = ()  # the zones of the services: one exchange zone each per peer

    def heartbeat(self, peer: str) -> Question | None:
        if self.heartbeat_zone is None:
            return None
        return question(heartbeat_name(peer, self.heartbeat_zone), TXT)


def build_questions(config: Config, before: Questions | None = None) -> Questions:
    """The questions of `config`'s polls (none without peers); those of `before` are reused for the
    names they already ask, so a reload that changes a few services builds a few questions."""
    targets: list[tuple[str, Question]] = []
    if config.peers is None or not config.peers.sites:  # nothing is polled
        origins = tuple(z.origin for z in config.zones)
        return Questions((), origins[0] if origins else None, origins)
    known = {q.name: q for _, q in before.targets if q.rdtype == A} if before is not None else {}
    known_aaaa = {q.name: q for _, q in before.targets if q.rdtype == AAAA} if before is not None else {}
    for service in config.services:
        name = localtargets_name(service)
        targets.append((service.name, known.get(name) or question(name, A)))
        targets.append((service.name, known_aaaa.get(name) or question(name, AAAA)))
    zones = [s.zone for s in config.services] or [z.origin for z in config.zones]
    return Questions(tuple(targets), zones[0] if zones else None, tuple(dict.fromkeys(zones)))


def parse_heartbeat(reply: Reply) -> float | None:
    """The heartbeat's Unix seconds; None when the peer has none (NXDOMAIN, NODATA, not a number)."""
    for text in reply.data:
        try:
            return float(text.strip())
        except ValueError:
            continue
    return None


class Pipes:
    """The TCP connections of the per-name polls, one per (peer, nameserver), and each peer's RTT and
    the nameserver that answered it last."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._pipes: dict[tuple[str, ListenAddress], TcpPipe] = {}
        self._rtt: dict[str, float] = {}
        self._first: dict[str, int] = {}

    def rtt(self, peer: str) -> float | None:
        """The peer's smoothed round trip in seconds (None before it is measured)."""
        return self._rtt.get(peer)

    async def get(self, peer: str, server: ListenAddress, timeout: float, local: str | None) -> TcpPipe:
        """The open connection to `server`, or a new one. TimeoutError or OSError when none."""
        pipe = self._pipes.get((peer, server))
        if pipe is not None and pipe.usable:
            return pipe
        pipe = await TcpPipe.open(server, timeout, self._rng, local)
        self._pipes[(peer, server)] = pipe
        return pipe

    def first(self, peer: str) -> int:
        """The index of the nameserver that answered `peer`'s last poll (0 at first)."""
        return self._first.get(peer, 0)

    def answered(self, peer: str, index: int) -> None:
        self._first[peer] = index

    def measured(self, peer: str, sample: float) -> None:
        before = self._rtt.get(peer)
        rtt = sample if before is None else before + RTT_GAIN * (sample - before)
        self._rtt[peer] = rtt
        PEER_RTT.labels(peer=peer).set(rtt)

    def close(self, peer: str | None = None) -> None:
        """Close the connections to `peer`'s nameservers (every peer's when None)."""
        for key in [k for k in self._pipes if peer is None or k[0] == peer]:
            self._pipes.pop(key).close()
        for gone in [p for p in self._rtt if peer is None or p == peer]:
            del self._rtt[gone]
            self._first.pop(gone, None)
            with contextlib.suppress(KeyError):
                PEER_RTT.remove(gone)


async def poll_names(
    pipes: Pipes,
    site: PeerSite,
    questions: Questions,
    tally: Tally,
    *,
    timeout: float,
    interval: float,
    key: TsigKey | None = None,
    source: Callable[[str], str | None] = lambda host: None,
) -> PeerAnswer:
    """One per-name poll of `site` (failed queries noted in `tally`; `source(host)`: the address to
    connect from to reach `host`, None for any). PollFailed when some question got no usable answer at
    any nameserver."""
    servers = site.nameservers
    count = len(servers)
    start = pipes.first(site.name) % count
    beat = questions.heartbeat(site.name)
    heartbeat: float | None = None
    todo = list(range(len(questions.targets)))
    found: list[tuple[str, ...]] = [()] * len(questions.targets)
    loop = asyncio.get_running_loop()
    for attempt in range(max(2, count)):
        index = (start + attempt) % count
        server = servers[index]
        try:
            pipe = await pipes.get(site.name, server, timeout, source(server.host))
        except TimeoutError:
            tally._fail_name(server, "TCP", f"cannot connect within {timeout:g}s")
            continue
        except OSError as exc:
            tally._fail_name(server, "TCP", f"cannot connect: {exc.strerror or exc}")
            continue
        if beat is not None:
            began = loop.time()
            (outcome,) = await pipe.ask_all([beat], timeout, key)
            if not _usable(tally, server, beat, outcome):
                continue
            assert isinstance(outcome, Reply)
            pipes.measured(site.name, loop.time() - began)
            heartbeat = parse_heartbeat(outcome)
            beat = None
        rtt = pipes.rtt(site.name)
        window = window_for(len(todo), FIRST_RTT if rtt is None else rtt, interval / 4)
        outcomes = await pipe.ask_all([questions.targets[i][1] for i in todo], timeout, key, window)
        failed: list[int] = []
        for i, outcome in zip(todo, outcomes, strict=True):
            if _usable(tally, server, questions.targets[i][1], outcome):
                assert isinstance(outcome, Reply)
                if outcome.rcode == NOERROR:
                    found[i] = outcome.data
            else:
                failed.append(i)
        pipes.answered(site.name, index)
        todo = failed
        if not todo:
            return PeerAnswer(_merge(questions.targets, found), heartbeat, str(server))
    raise PollFailed(tally.last_error)


def _usable(tally: Tally, server: ListenAddress, q: Question, outcome: Outcome) -> bool:
    """Whether `outcome` answers `q` (NOERROR or NXDOMAIN); a failure is noted in `tally`."""
    if isinstance(outcome, str):
        tally._fail_name(server, q.name, outcome)
        return False
    if outcome.rcode not in (NOERROR, NXDOMAIN):
        tally._fail_name(server, q.name, f"rcode {rcode_text(outcome.rcode)}")
        return False
    return True


def _merge(
    targets: Sequence[tuple[str, Question]], found: Sequence[tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """Service fqdn -> the addresses of its answered questions, in question order (services without any
    are left out)."""
    out: dict[str, tuple[str, ...]] = {}
    for (service, _), data in zip(targets, found, strict=True):
        if data:
            out[service] = out.get(service, ()) + data
    return out
