"""The multi-site exchange of one running instance, as the composition root uses it.

Exchange(config, clock, rng, on_peers=..., on_beat=...)
  poller    polls every peer site (poller.py) into a PeerBook; `on_peers()` when the endpoints
            learned from peers change (the root then rebuilds the answers)
  notifier  sends NOTIFY to every peer nameserver when this site's publication changes
  heartbeat `on_beat()` every `heartbeat_period` (peers.interval / 2, 2.5 s without peers): the root
            records a health evaluation and refreshes the heartbeat record cheaply
after_commit(notify_zones)        after every committed generation: NOTIFY peers about the zones it changed
notify_received(zone, ip, v6)     the wire layer's NOTIFY hook: accept (and re-poll) or refuse
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Collection, Mapping, Sequence

from gslbd.clock import Clock
from gslbd.exchange.notify import Notifier, notify_accepted, notify_sources, source_address
from gslbd.exchange.peerbook import PeerBook
from gslbd.exchange.peerstate import PeerState
from gslbd.exchange.poller import Poller
from gslbd.metrics import NOTIFY_RECEIVED
from gslbd.model.config import Config
from gslbd.model.service import Endpoint

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0


def heartbeat_period(config: Config) -> float:
    """How often the heartbeat is refreshed: half the peers' polling interval (default 5 s)."""
    interval = config.peers.interval if config.peers is not None else DEFAULT_INTERVAL
    return interval / 2


class Exchange:
    """Polling, NOTIFY and heartbeat of one instance. Inert (no tasks) until `start`."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        rng: random.Random,
        *,
        on_peers: Callable[[], None],
        on_beat: Callable[[], None],
    ) -> None:
        self._config = config
        self._on_beat = on_beat
        self.poller = Poller(config, clock, random.Random(rng.getrandbits(64)), on_peers)
        self.notifier = Notifier(config, random.Random(rng.getrandbits(64)))
        self._sources = notify_sources(config)
        self._started = False
        self._beat: asyncio.Task[None] | None = None

    @property
    def book(self) -> PeerBook:
        return self.poller.book

    @property
    def enabled(self) -> bool:
        """Whether peer sites are configured (NOTIFY is then answered)."""
        return self._config.peers is not None

    def endpoints(self) -> Mapping[str, tuple[Endpoint, ...]]:
        """Endpoints learned from fresh peers, per service fqdn."""
        return self.poller.book.endpoints()

    def peers(self) -> list[PeerState]:
        return self.poller.book.states()

    async def start(self, publication: Collection[str]) -> None:
        """Start polling and beating; tell the peers about this site's publication (it may be new):
        `publication` holds the zones where this site publishes endpoints."""
        self._started = True
        await self.poller.start()
        self._beat = asyncio.get_running_loop().create_task(self._beat_loop(), name="gslbd-heartbeat")
        peers = self._config.peers
        if peers is not None and peers.notify and publication:
            self.notifier.send(list(publication))

    async def stop(self) -> None:
        self._started = False  # stopped: commits announce nothing any more
        beat, self._beat = self._beat, None
        if beat is not None:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        await self.poller.stop()
        await self.notifier.stop()
        self.poller.book.close()

    def update(self, config: Config) -> bool:
        """Follow a reloaded configuration (peers, discovery results, timings, services). True when
        the endpoints learned from peers changed (the caller rebuilds)."""
        self._config = config
        self._sources = notify_sources(config)
        self.notifier.update(config)
        return self.poller.update(config)

    def after_commit(self, notify_zones: Sequence[str]) -> None:
        """A generation was committed: NOTIFY the peers about the zones whose publication it changed
        (the generation decided which; nothing is compared here)."""
        peers = self._config.peers
        if self._started and notify_zones and peers is not None and peers.notify:
            self.notifier.send(list(notify_zones))

    def notify_accepted(self, zone: str, ip: int, v6: bool) -> bool:
        """Would `notify_received` accept this NOTIFY? Reads only; safe from the DNS threads."""
        return notify_accepted(self._sources, zone, ip, v6)

    def notify_received(self, zone: str, ip: int, v6: bool) -> bool:
        """A NOTIFY for `zone` ("" when it names no served zone) came from (ip, v6): accept it and poll
        the peer(s) behind that address at once, or refuse it. Counted either way."""
        names = (
            self._sources.get(source_address(ip, v6), ())
            if notify_accepted(self._sources, zone, ip, v6)
            else ()
        )
        poked = [name for name in names if self.poller.poke(name)]
        NOTIFY_RECEIVED.labels(result="accepted" if poked else "refused").inc()
        return bool(poked)

    async def _beat_loop(self) -> None:
        while True:
            try:
                self._on_beat()
            except Exception:  # the heartbeat must outlive a bug in one refresh
                log.exception("refreshing the heartbeat failed")
            await asyncio.sleep(heartbeat_period(self._config))
