"""Polling the peer sites: every `peers.interval`, each peer concurrently, over DNS.

One task per peer. A poll first asks the peer's heartbeat (`heartbeat-<peer>.<origin>` TXT) of the first
zone, trying the peer's nameservers in order; the first that answers serves the rest of the poll: A and
AAAA of every service's `localtargets-<label>.<origin>`, at most MAX_IN_FLIGHT queries in flight per
peer. A query that fails (timeout `peers.timeout`, network error, an rcode other than NOERROR/NXDOMAIN,
a reply that does not match) is retried at the peer's next nameserver (at least two attempts in all);
a truncated reply is asked again over TCP. NXDOMAIN means the peer has no endpoints for that service.

Only a complete poll replaces the peer's view (`PeerBook.answer`); a poll in which some question got no
answer at all is a failure (`PeerBook.failure`) and the last view is kept (until stale_after). A dead
peer costs one heartbeat per nameserver per attempt, not thousands of timeouts.

`poke(peer)` (a NOTIFY from that peer) starts a poll at once; pokes during a poll cause one more poll
right after it. Polls of one peer never overlap, and the next regular poll is `interval` after the
previous one started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gslbd.answer.exchange_names import heartbeat_name, localtargets_name
from gslbd.clock import Clock
from gslbd.exchange.notify import source_host
from gslbd.exchange.peerbook import PeerBook
from gslbd.exchange.peerstate import PeerAnswer
from gslbd.exchange.transport import UdpChannel, ask_tcp, sign
from gslbd.exchange.wireformat import AAAA, TXT, A, BadReply, Question, Reply, question
from gslbd.exchange.xfrclient import (
    NoChannel,
    TransferFailed,
    ZoneCopy,
    merged_targets,
    read_soa_reply,
    transfer,
)
from gslbd.exchange.xfrwire import soa_query
from gslbd.exchange.zone import exchange_apex
from gslbd.metrics import PEER_CHANNEL_POLLS
from gslbd.model.config import Config, ListenAddress, PeerSite
from gslbd.model.tsig import TsigKey

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 100  # queries in flight to one peer
TRANSFER_TIMEOUT = 30.0  # seconds for one IXFR/AXFR of a peer's exchange zone
REPROBE_POLLS = 12  # a peer without an exchange zone is asked for it again every this many polls
NOERROR, NXDOMAIN = 0, 3


class PollFailed(Exception):
    """A question of a poll got no usable answer from any of the peer's nameservers."""


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
    if config.peers is not None and config.peers.sites:
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


class _Poll:
    """One poll of one peer: state shared by its query workers."""

    def __init__(
        self,
        peer: PeerSite,
        channels: list[UdpChannel],
        timeout: float,
        rng: random.Random,
        key: TsigKey | None = None,
    ) -> None:
        self.peer = peer
        self.channels = channels
        self.timeout = timeout
        self.rng = rng
        self.key = key  # peers.tsig: every question signed, every reply verified
        self.errors = 0
        self.last_error = ""
        self.first = 0  # index of the nameserver that answered the heartbeat

    async def ask(self, q: Question, *, pin: bool = False) -> Reply:
        """The reply to `q` from the first nameserver that gives a usable one, starting with the one
        that answered first (`pin`: this answer chooses it). PollFailed otherwise."""
        count = len(self.channels)
        start = 0 if pin else self.first
        for attempt in range(max(2, count)):
            index = (start + attempt) % count
            channel = self.channels[index]
            try:
                reply = await channel.ask(q, self.timeout, self.key)
                if reply.truncated:
                    reply = await ask_tcp(channel.server, q, self.timeout, self.rng, self.key)
            except TimeoutError:
                self._fail(channel.server, q, f"timeout after {self.timeout:g}s")
                continue
            except (OSError, BadReply) as exc:
                self._fail(channel.server, q, str(exc) or type(exc).__name__)
                continue
            if reply.rcode in (NOERROR, NXDOMAIN):
                if pin:
                    self.first = index
                return reply
            self._fail(channel.server, q, f"rcode {reply.rcode}")
        raise PollFailed(self.last_error)

    async def ask_soa(self, apex: str, beat_owner: str) -> tuple[int, float | None]:
        """(serial, heartbeat) of the peer's exchange zone `apex`, from the first nameserver that
        answers (it serves the rest of the poll). NoChannel when the peer has none; PollFailed when no
        nameserver answers."""
        count = len(self.channels)
        for attempt in range(max(2, count)):
            index = attempt % count
            channel = self.channels[index]
            try:
                qid = channel.new_id()
                message, mac = sign(soa_query(apex, qid), self.key)
                data = await channel.exchange(message, qid, self.timeout)
                found = read_soa_reply(data, qid, apex, beat_owner, self.key, mac)
            except TimeoutError:
                self._fail_name(channel.server, apex, f"timeout after {self.timeout:g}s")
                continue
            except (OSError, TransferFailed) as exc:
                self._fail_name(channel.server, apex, str(exc) or type(exc).__name__)
                continue
            self.first = index
            return found
        raise PollFailed(self.last_error)

    def _fail(self, server: ListenAddress, q: Question, why: str) -> None:
        self._fail_name(server, q.name, why)

    def _fail_name(self, server: ListenAddress, name: str, why: str) -> None:
        self.errors += 1
        self.last_error = f"{name} from {server}: {why}"


class Poller:
    """Polls every peer site of the configuration and keeps a `PeerBook` up to date. `on_change` is
    called (on the loop) whenever the endpoints learned from peers change."""

    def __init__(
        self, config: Config, clock: Clock, rng: random.Random, on_change: Callable[[], None]
    ) -> None:
        self._clock = clock
        self._rng = rng
        self._on_change = on_change
        self.book = PeerBook(config, clock)
        self._questions = build_questions(config)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._sites: dict[str, PeerSite] = {}
        self._running = False
        self._copies: dict[str, dict[str, ZoneCopy]] = {}  # peer -> origin -> its exchange zone
        self._targets: dict[str, dict[str, tuple[str, ...]]] = {}  # peer -> its copies merged
        self._carried: dict[tuple[str, str], int] = {}  # (peer, origin) -> serial its NOTIFY carried
        self._per_name: dict[str, int] = {}  # peer -> polls left before its exchange zone is asked again
        self.mode: dict[str, str] = {}  # peer -> "channel" or "per-name": how its last poll went

    @property
    def config(self) -> Config:
        return self.book.config

    async def start(self) -> None:
        self._running = True
        self._sync_tasks()

    async def stop(self) -> None:
        self._running = False
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def update(self, config: Config) -> bool:
        """Follow a reloaded configuration (peers, their nameservers, services, timings). True when
        the learned endpoints changed (the caller rebuilds; `on_change` is not called)."""
        changed = self.book.configure(config)
        self._questions = build_questions(config, self._questions)
        if self._running:
            self._sync_tasks()
        return changed

    def carried(self, peer: str, origin: str, serial: int) -> None:
        """A NOTIFY from `peer` carried its exchange zone's serial for `origin`: the next poll need not
        ask it. Called from the DNS threads (one dict assignment)."""
        self._carried[(peer, origin)] = serial

    def poke(self, peer: str) -> bool:
        """Poll `peer` now (a NOTIFY came from it). False when it is not a configured peer."""
        wake = self._wake.get(peer)
        if wake is None:
            return False
        wake.set()
        return True

    def _sync_tasks(self) -> None:
        peers = self.config.peers
        wanted = {p.name: p for p in peers.sites if p.nameservers} if peers is not None else {}
        for name in list(self._tasks):
            if wanted.get(name) != self._sites.get(name):
                self._tasks.pop(name).cancel()
                self._wake.pop(name, None)
        for name in set(self._copies) - set(wanted):
            del self._copies[name]
            self._targets.pop(name, None)
        loop = asyncio.get_running_loop()
        for name, site in wanted.items():
            self._sites[name] = site
            if name not in self._tasks:
                self._wake[name] = asyncio.Event()
                self._tasks[name] = loop.create_task(self._run(name), name=f"gslbd-peer-{name}")

    async def _run(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        wake = self._wake[name]
        while True:
            started = loop.time()
            wake.clear()
            try:
                await self._poll(self._sites[name])
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not end the exchange with this peer
                log.exception("polling peer %s failed unexpectedly", name)
            peers = self.config.peers
            interval = peers.interval if peers is not None else 5.0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, started + interval - loop.time())):
                    await wake.wait()

    async def _poll(self, site: PeerSite) -> None:
        peers = self.config.peers
        if peers is None:
            return
        channels: list[UdpChannel] = []
        try:
            for server in site.nameservers:
                with contextlib.suppress(OSError):
                    channels.append(await UdpChannel.open(server, self._rng))
            if not channels:
                changed = self.book.failure(site.name, "cannot open a socket to any nameserver", 1)
            else:
                changed = await self._poll_with(site, channels, peers.timeout, peers.interval, peers.tsig)
        finally:
            for channel in channels:
                channel.close()
        if changed:
            self._on_change()

    async def _poll_with(
        self,
        site: PeerSite,
        channels: list[UdpChannel],
        timeout: float,
        interval: float,
        key: TsigKey | None = None,
    ) -> bool:
        poll = _Poll(site, channels, timeout, self._rng, key)
        peers = self.config.peers
        if peers is not None and peers.transfer and self._per_name.get(site.name, 0) <= 0:
            try:
                # SOA queries time out on their own; a transfer may take up to TRANSFER_TIMEOUT (the first
                # AXFR of 100k services is about 2 MB, read in about 2 s of CPU)
                return await self._poll_channel(site, poll, timeout, interval)
            except NoChannel as exc:
                if self.mode.get(site.name) != "per-name":
                    log.info("peer %s offers no exchange zone (%s): polling it name by name", site.name, exc)
                self._per_name[site.name] = REPROBE_POLLS
                self._copies.pop(site.name, None)
                self._targets.pop(site.name, None)
            except PollFailed as exc:
                return self.book.failure(site.name, str(exc), poll.errors)
            poll = _Poll(site, channels, timeout, self._rng, key)
        self._per_name[site.name] = self._per_name.get(site.name, 0) - 1
        self.mode[site.name] = "per-name"
        PEER_CHANNEL_POLLS.labels(peer=site.name, kind="per_name").inc()
        heartbeat: float | None = None
        targets: dict[str, list[str]] = {}
        try:
            async with asyncio.timeout(max(interval, 2 * timeout)):
                beat = self._questions.heartbeat(site.name)
                if beat is not None:
                    heartbeat = parse_heartbeat(await poll.ask(beat, pin=True))
                await _gather(poll, self._questions.targets, targets)
        except PollFailed as exc:
            return self.book.failure(site.name, str(exc), poll.errors)
        except TimeoutError:
            return self.book.failure(site.name, f"the poll took longer than {interval:g}s", poll.errors)
        answer = PeerAnswer(
            {svc: tuple(addrs) for svc, addrs in targets.items() if addrs},
            heartbeat,
            str(channels[poll.first].server),
        )
        return self.book.answer(site.name, answer, poll.errors)

    async def _poll_channel(self, site: PeerSite, poll: _Poll, timeout: float, interval: float) -> bool:
        """A poll over the peer's exchange zones: per served zone one SOA query (none when a NOTIFY
        carried the serial), and an IXFR (AXFR the first time) only when the serial changed."""
        before = self.book.state(site.name)
        heartbeat = before.heartbeat if before is not None else None
        copies = dict(self._copies.get(site.name, {}))
        kinds: list[str] = []
        local = source_host(self.config, poll.channels[0].server.host)
        for origin in self._questions.zones:
            carried = self._carried.pop((site.name, origin), None)
            new, beat, kind = await _poll_zone(
                poll, site, origin, copies.get(origin), carried, timeout, self._rng, local
            )
            if beat is not None:
                heartbeat = beat
            if new is not None:
                copies[origin] = new
            kinds.append(kind)
        self._copies[site.name] = copies
        if self.mode.get(site.name) == "per-name":
            log.info("peer %s offers its exchange zone: polling it by SOA serial", site.name)
        self.mode[site.name] = "channel"
        self._per_name.pop(site.name, None)
        summary = next((k for k in ("axfr", "ixfr") if k in kinds), "unchanged")
        PEER_CHANNEL_POLLS.labels(peer=site.name, kind=summary).inc()
        targets = self._targets.get(site.name)
        if targets is None or any(k != "unchanged" for k in kinds):
            targets = merged_targets(copies.values())
            self._targets[site.name] = targets
        answer = PeerAnswer(targets, heartbeat, str(poll.channels[poll.first].server))
        return self.book.answer(site.name, answer, poll.errors)


async def _poll_zone(
    poll: _Poll,
    site: PeerSite,
    origin: str,
    have: ZoneCopy | None,
    carried: int | None,
    timeout: float,
    rng: random.Random,
    local_host: str | None,
) -> tuple[ZoneCopy | None, float | None, str]:
    """One exchange zone of a peer: (the new copy or None when unchanged, the heartbeat when the SOA
    was asked, how: unchanged | ixfr | axfr | current)."""
    apex = exchange_apex(site.name, origin)
    heartbeat: float | None = None
    if carried is not None and have is not None and carried == have.serial:
        return None, None, "unchanged"
    if carried is None:
        serial, heartbeat = await poll.ask_soa(apex, heartbeat_name(site.name, origin))
        if have is not None and serial == have.serial:
            return None, heartbeat, "unchanged"
    server = poll.channels[poll.first].server
    try:
        copy, kind, _ = await transfer(
            server, apex, origin, have, max(TRANSFER_TIMEOUT, timeout), rng, poll.key, local_host
        )
    except TimeoutError:
        poll._fail_name(server, apex, "the transfer timed out")
        raise PollFailed(poll.last_error) from None
    except (OSError, TransferFailed) as exc:
        poll._fail_name(server, apex, f"transfer: {exc}")
        raise PollFailed(poll.last_error) from None
    return copy, heartbeat, kind


async def _gather(poll: _Poll, questions: Sequence[tuple[str, Question]], out: dict[str, list[str]]) -> None:
    """Ask every question with at most MAX_IN_FLIGHT in flight; PollFailed at the first that fails."""
    queue = iter(questions)

    async def worker() -> None:
        for service, q in queue:
            reply = await poll.ask(q)
            if reply.rcode == NOERROR and reply.data:
                out.setdefault(service, []).extend(reply.data)

    tasks = [asyncio.ensure_future(worker()) for _ in range(min(MAX_IN_FLIGHT, len(questions)))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
