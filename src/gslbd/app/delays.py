"""The control plane's side of `failover_delay` / `failback_delay` (answer/delays.py decides).

Before every snapshot the composition root asks `DelayKeeper.update` for the holds of now: it advances
the site tracks of every service with a delay from the health book (verdicts, admin states, learned
endpoints), hands the holds to the book (which carries them into the snapshot and marks the services
whose holds changed, so only those are rebuilt) and says when the earliest hold ends; the root then
schedules one rebuild for that moment (`App._schedule_expiry`). Nothing here runs per query.
"""

from __future__ import annotations

from gslbd.answer.delays import SiteTrack, has_delays, next_expiry, site_up, track_service
from gslbd.answer.exchange_names import merged_endpoints, peer_site_names
from gslbd.model.config import Config
from gslbd.model.service import Service
from gslbd.state.book import HealthBook
from gslbd.state.hold import Hold
from gslbd.state.snapshot import Snapshot, effective_up


class DelayKeeper:
    """The site tracks of the services with delays, by service name (kept across reloads by name)."""

    def __init__(self) -> None:
        self._tracks: dict[str, dict[str, SiteTrack]] = {}
        self._config: Config | None = None
        self._services: tuple[Service, ...] = ()
        self._peers: frozenset[str] = frozenset()

    def _follow(self, config: Config) -> None:
        if config is self._config:
            return
        self._config = config
        self._services = tuple(s for s in config.services if has_delays(s))
        self._peers = peer_site_names(config)
        names = {s.name for s in self._services}
        self._tracks = {name: tracks for name, tracks in self._tracks.items() if name in names}

    def update(self, config: Config, book: HealthBook, now: float) -> float | None:
        """Advance every track to `now`, give the book the holds, and return when the earliest ends
        (None: nothing is held)."""
        self._follow(config)
        if not self._services and not book.holds:
            return None
        view = Snapshot(health=book.health, admin=book.admin, peer_endpoints=book.peer_endpoints)
        holds: dict[str, tuple[Hold, ...]] = {}
        for service in self._services:
            endpoints = merged_endpoints(service, view, self._peers)
            ups = site_up(service, endpoints, lambda e: effective_up(e, view))
            before = self._tracks.get(service.name, {})
            # A peer site publishes only its up endpoints: one that publishes none has no candidates.
            for site in [e.site for e in service.endpoints] + [s for s in before if s in self._peers]:
                ups.setdefault(site, False)
            present = {e.site for e in endpoints}
            tracks, held = track_service(service, ups, before, now, present)
            self._tracks[service.name] = tracks
            if held:
                holds[service.name] = held
        book.set_holds(holds)
        return next_expiry(h for held in holds.values() for h in held)
