"""Polling the peer sites: every `peers.interval`, each peer concurrently, over DNS.

One task per peer. A gslbd peer is polled over its exchange zones (one SOA query per zone, a transfer
when the serial moved: `_poll_channel`); a peer without them (k8gb, `peers.transfer: false`) name by name
over pipelined TCP (pername.py). Only a complete poll replaces the peer's view (`PeerBook.answer`); a
poll in which some question got no answer at all is a failure (`PeerBook.failure`) and the last view is
kept (until stale_after). A dead peer costs one attempt per nameserver, not thousands of timeouts.

A per-name poll has a deadline (`deadline`): two intervals (at least two query timeouts) plus four of the
peer's measured round trips (connect, heartbeat, the first and the last reply of the pipeline). A poll
longer than an interval delays the next one, so the view is never much older than two intervals; one
that misses the deadline fails like any other and counts as one error of the peer (metric and `gslbd
status`). A peer that stops answering fails sooner: after `peers.timeout` without a reply.

`poke(peer)` (a NOTIFY from that peer) starts a poll at once; pokes during a poll cause one more poll
right after it. Polls of one peer never overlap, and the next regular poll is `interval` after the
previous one started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable

from gslbd.answer.exchange_names import heartbeat_name
from gslbd.clock import Clock
from gslbd.exchange.notify import source_host
from gslbd.exchange.peerbook import PeerBook
from gslbd.exchange.peerstate import PeerAnswer
from gslbd.exchange.pername import FIRST_RTT, Pipes, PollFailed, Tally, build_questions, poll_names
from gslbd.exchange.transport import UdpChannel, sign
from gslbd.exchange.xfrclient import (
    NoChannel,
    TransferFailed,
    ZoneCopy,
    merged_loads,
    merged_targets,
    merged_votes,
    read_soa_reply,
    transfer,
)
from gslbd.exchange.xfrwire import soa_query
from gslbd.metrics import PEER_CHANNEL_POLLS
from gslbd.model.config import Config, PeerSite
from gslbd.model.exchange_cut import exchange_apex
from gslbd.model.tsig import TsigKey

log = logging.getLogger(__name__)

TRANSFER_TIMEOUT = 30.0  # seconds for one IXFR/AXFR of a peer's exchange zone
# ...in which the connect and every wait for more bytes may take at most this long (a link that dies
# mid-transfer fails the poll in seconds: the peer is then "not answering", not silently fresh)
TRANSFER_IDLE, IDLE_TIMEOUTS = 2.0, 3
REPROBE_POLLS = 12  # a peer without an exchange zone is asked for it again every this many polls
DEADLINE_INTERVALS = 2  # a per-name poll may take this many intervals...
DEADLINE_RTTS = 4  # ...plus this many round trips of the peer


def deadline(interval: float, timeout: float, rtt: float | None) -> float:
    """Seconds a per-name poll may take: max(2 x interval, 2 x timeout) plus DEADLINE_RTTS round trips
    of the peer (FIRST_RTT before one is measured)."""
    base = max(DEADLINE_INTERVALS * interval, 2 * timeout)
    return base + DEADLINE_RTTS * (FIRST_RTT if rtt is None else rtt)


class _Poll(Tally):
    """One poll of one peer over its exchange zones: the UDP channels its SOA queries go through."""

    def __init__(
        self,
        peer: PeerSite,
        channels: list[UdpChannel],
        timeout: float,
        rng: random.Random,
        key: TsigKey | None = None,
    ) -> None:
        super().__init__()
        self.peer = peer
        self.channels = channels
        self.timeout = timeout
        self.rng = rng
        self.key = key  # peers.tsig: every question signed, every reply verified
        self.first = 0  # index of the nameserver that answered the SOA

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
        self._votes: dict[str, dict[str, tuple[str, ...]]] = {}  # peer -> its copies' votes merged
        self._loads: dict[str, dict[str, tuple[str, ...]]] = {}  # peer -> its copies' load figures
        self._carried: dict[tuple[str, str], int] = {}  # (peer, origin) -> serial its NOTIFY carried
        self._per_name: dict[str, int] = {}  # peer -> polls left before its exchange zone is asked again
        self.mode: dict[str, str] = {}  # peer -> "channel" or "per-name": how its last poll went
        self._pipes = Pipes(rng)  # the TCP connections of per-name polls, kept from poll to poll

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
        self._pipes.close()

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
        """Poll `peer` now (a NOTIFY came from it). False when it is not a configured peer. Before
        `start` nothing is needed: every peer's first poll begins when polling starts."""
        wake = self._wake.get(peer)
        if wake is None:
            peers = self.config.peers
            return not self._running and peers is not None and any(p.name == peer for p in peers.sites)
        wake.set()
        return True

    def _sync_tasks(self) -> None:
        peers = self.config.peers
        wanted = {p.name: p for p in peers.sites if p.nameservers} if peers is not None else {}
        for name in list(self._tasks):
            if wanted.get(name) != self._sites.get(name):
                self._tasks.pop(name).cancel()
                self._wake.pop(name, None)
                self._pipes.close(name)  # its nameservers changed, or it is gone
        for name in set(self._copies) - set(wanted):
            del self._copies[name]
            self._targets.pop(name, None)
            self._votes.pop(name, None)
            self._loads.pop(name, None)
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
        if peers.transfer and self._per_name.get(site.name, 0) <= 0:
            changed = await self._poll_over_channel(site, peers.timeout, peers.interval, peers.tsig)
        else:
            changed = None
        if changed is None:
            changed = await self._poll_names(site, peers.timeout, peers.interval, peers.tsig)
        if changed:
            self._on_change()

    async def _poll_over_channel(
        self, site: PeerSite, timeout: float, interval: float, key: TsigKey | None
    ) -> bool | None:
        """A poll over the peer's exchange zones; None when it offers none (poll it name by name)."""
        channels: list[UdpChannel] = []
        try:
            for server in site.nameservers:
                with contextlib.suppress(OSError):
                    channels.append(await UdpChannel.open(server, self._rng))
            if not channels:
                return self.book.failure(site.name, "cannot open a socket to any nameserver", 1)
            poll = _Poll(site, channels, timeout, self._rng, key)
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
                self._votes.pop(site.name, None)
                self._loads.pop(site.name, None)
                return None
            except PollFailed as exc:
                return self.book.failure(site.name, str(exc), poll.errors)
        finally:
            for channel in channels:
                channel.close()

    async def _poll_names(self, site: PeerSite, timeout: float, interval: float, key: TsigKey | None) -> bool:
        """A per-name poll (pername.py), within its deadline: `deadline(...)` seconds. A poll that
        misses it fails and counts as one more error of the peer."""
        self._per_name[site.name] = self._per_name.get(site.name, 0) - 1
        self.mode[site.name] = "per-name"
        PEER_CHANNEL_POLLS.labels(peer=site.name, kind="per_name").inc()
        tally = Tally()
        limit = deadline(interval, timeout, self._pipes.rtt(site.name))
        config = self.config
        try:
            async with asyncio.timeout(limit):
                answer = await poll_names(
                    self._pipes,
                    site,
                    self._questions,
                    tally,
                    timeout=timeout,
                    interval=interval,
                    key=key,
                    source=lambda host: source_host(config, host),
                )
        except PollFailed as exc:
            return self.book.failure(site.name, str(exc), tally.errors)
        except TimeoutError:
            self._pipes.close(site.name)  # what is still in flight is not waited for
            why = f"the poll missed its deadline of {limit:.3g}s"
            return self.book.failure(site.name, why, tally.errors + 1)
        return self.book.answer(site.name, answer, tally.errors)

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
        votes, loads = self._votes.get(site.name), self._loads.get(site.name)
        if targets is None or votes is None or loads is None or any(k != "unchanged" for k in kinds):
            targets = merged_targets(copies.values())
            self._targets[site.name] = targets
            votes = self._votes[site.name] = merged_votes(copies.values())
            loads = self._loads[site.name] = merged_loads(copies.values())
        server = str(poll.channels[poll.first].server)
        answer = PeerAnswer(targets, heartbeat, server, votes, loads)
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
            server,
            apex,
            origin,
            have,
            max(TRANSFER_TIMEOUT, timeout),
            rng,
            poll.key,
            local_host,
            idle=max(TRANSFER_IDLE, IDLE_TIMEOUTS * timeout),
        )
    except TimeoutError:
        poll._fail_name(server, apex, "the transfer timed out")
        raise PollFailed(poll.last_error) from None
    except (OSError, TransferFailed) as exc:
        poll._fail_name(server, apex, f"transfer: {exc}")
        raise PollFailed(poll.last_error) from None
    return copy, heartbeat, kind
