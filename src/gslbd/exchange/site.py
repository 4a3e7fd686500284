"""The multi-site exchange of one running instance, as the composition root uses it.

Exchange(config, clock, rng, on_peers=..., on_beat=...)
  poller    polls every peer site (poller.py) into a PeerBook; `on_peers()` when the endpoints
            learned from peers change (the root then rebuilds the answers)
  notifier  sends NOTIFY to every peer nameserver when this site's publication changes
  heartbeat `on_beat()` every `heartbeat_period` (peers.interval / 2, 2.5 s without peers): the root
            records a health evaluation and refreshes the heartbeat record cheaply
after_commit(notify_zones, publication, config)   after every committed generation: NOTIFY peers about
                                  the zones it changed, and record the change in this site's exchange
                                  zones (a new serial)
notify_received(zone, ip, v6)     the wire layer's NOTIFY hook: accept (and re-poll) or refuse
hook()                            the responder's exchange hook (wire/transfer.py) that serves this
                                  site's exchange zones (SOA, AXFR, IXFR; exchange/xfrserve.py), or
                                  None when there is none (no peers, peers.transfer false, not started)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping, Sequence

from gslbd.clock import Clock
from gslbd.exchange.notify import Notifier, notify_accepted, notify_sources, source_address
from gslbd.exchange.peerbook import PeerBook
from gslbd.exchange.peerstate import PeerState
from gslbd.exchange.poller import Poller
from gslbd.exchange.xfrserve import ExchangeZones
from gslbd.metrics import NOTIFY_RECEIVED
from gslbd.model.config import Config
from gslbd.model.exchange_cut import serves_exchange_zone
from gslbd.model.service import Endpoint
from gslbd.wire.transfer import ExchangeHook

__all__ = ["Exchange", "heartbeat_period", "source_address"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0

# zone origin -> localtargets name -> addresses: what this site publishes (the generation's publication)
Publication = Mapping[str, Mapping[str, tuple[str, ...]]]


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
        self._clock = clock
        self._on_beat = on_beat
        self.zones: ExchangeZones | None = None  # this site's exchange zones, once prepared
        self._prepared: Publication | None = None  # the publication `prepare` made them from
        self.poller = Poller(config, clock, random.Random(rng.getrandbits(64)), on_peers)
        self.notifier = Notifier(config, random.Random(rng.getrandbits(64)))
        self.notifier.serial = self._serial
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

    def prepare(self, publication: Publication, config: Config | None = None) -> None:
        """Make the exchange zones this site serves (no network): set `hook()` on the responder before
        DNS binds, and a peer's first poll finds them (a peer that polls too early and finds none
        falls back to polling name by name)."""
        config = config if config is not None else self._config
        if serves_exchange_zone(config):
            self.zones = ExchangeZones(config, publication, self._clock.wall(), self.poller.carried)
            self._prepared = publication

    async def start(self, publication: Publication, config: Config | None = None) -> None:
        """Start polling and beating; tell the peers about this site's publication (it may be new):
        `publication` is the generation's (zone -> localtargets name -> addresses), `config` its config."""
        self._started = True
        config = config if config is not None else self._config
        if serves_exchange_zone(config) and (self.zones is None or self._prepared is not publication):
            self.zones = ExchangeZones(config, publication, self._clock.wall(), self.poller.carried)
        await self.poller.start()
        self._beat = asyncio.get_running_loop().create_task(self._beat_loop(), name="gslbd-heartbeat")
        peers = self._config.peers
        if peers is not None and peers.notify and publication:
            self.notifier.send(list(publication))

    async def stop(self) -> None:
        self._started = False  # stopped: commits announce nothing any more
        self.zones = None
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

    def after_commit(
        self,
        notify_zones: Sequence[str],
        publication: Publication | None = None,
        config: Config | None = None,
    ) -> None:
        """A generation was committed: NOTIFY the peers about the zones whose publication it changed
        (the generation decided which; nothing is compared here), and follow its publication in this
        site's exchange zones (a new serial per changed zone)."""
        peers = self._config.peers
        if self._started and publication is not None:
            self._follow(config if config is not None else self._config, publication, notify_zones)
        if self._started and notify_zones and peers is not None and peers.notify:
            self.notifier.send(list(notify_zones))

    def hook(self) -> ExchangeHook | None:
        """What the responder asks about exchange-zone questions (wire/transfer.py), or None."""
        zones = self.zones
        return zones.handle if zones is not None else None

    def _follow(self, config: Config, now: Publication, zones: Sequence[str]) -> None:
        """Keep the exchange zones in step with the publication (and with a new configuration)."""
        wall = self._clock.wall()
        if not serves_exchange_zone(config):
            self.zones = None
        elif self.zones is None:
            self.zones = ExchangeZones(config, now, wall, self.poller.carried)
        elif self.zones.config is not config:
            self.zones.configure(config, now, wall)
        elif zones:
            self.zones.update(now, zones, wall)

    def _serial(self, origin: str) -> int | None:
        zones = self.zones
        return zones.serial(origin) if zones is not None else None

    def notify_accepted(self, zone: str, ip: int, v6: bool) -> bool:
        """Would `notify_received` accept this NOTIFY? Reads only; safe from the DNS threads."""
        return notify_accepted(self._sources, zone, ip, v6)

    def notify_early(self, zone: str, ip: int, v6: bool) -> bool:
        """A NOTIFY that came while this site starts (before polling): answered by the same rule and
        counted, with nothing to poke (every peer's first poll is about to begin). Safe from any thread."""
        accepted = notify_accepted(self._sources, zone, ip, v6)
        NOTIFY_RECEIVED.labels(result="accepted" if accepted else "refused").inc()
        return accepted

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
