"""The composition root: builds everything a running gslbd needs from one Config, in order.

    App(config, clock, rng, store=...)
      resolved   = app.generation.resolve(config)         GeoIP opened, URLs parsed, probe targets:
                                                           ConfigError here means the config is unusable
      book       = state.book.HealthBook()                 verdicts and run-time admin overrides
      generation = GenerationBuilder().first(resolved, book.snapshot())
                                                           config, environment, snapshot, view, table,
                                                           what counts, publication: one frozen value
      responder  = wire.Responder(table, view, rng)        what the listeners call per message
    await start()  loads admin states from the store, starts the API (not ready yet), binds UDP+TCP on
                   every dns.listen address (in this process, or in dns.workers worker processes that
                   get the changes over a pipe), starts the health scheduler; ready
    every change   (a verdict, an admin state, the peers' view, the heartbeat, a config) becomes the
                   next generation through GenerationBuilder.next and is committed by `_commit`: one
                   assignment, then the responder, the workers, the gauges and the exchange are told.
                   A build that fails leaves the committed generation serving.
    probe result -> health.fsm.step -> book.record for every endpoint sharing the probe; a changed
                   verdict schedules ONE rebuild on the event loop (call_soon: a burst of verdicts
                   costs one rebuild), live within 100 ms
    set_admin()    store.save_admin + book.set_admin + rebuild, before it returns
    cluster mode   (config.cluster) a cluster.ClusterNode: start() connects to Redis, subscribes and seeds
                   the book from the shared health keys after the API is up (/readyz 503 meanwhile) and
                   before binding; it is the scheduler's probe gate, feeds shared results into
                   _on_result, and keeps admin states in Redis (self.store is its RedisStateStore)
    exchange       (config.peers) an exchange.Exchange: start() after binding polls the peer sites; their
                   published endpoints -> book.set_peer_endpoints -> rebuild; NOTIFY to the peers for the
                   zones a committed generation says changed; NOTIFY from peers answered by the
                   responder's hook; the heartbeat (every peers.interval/2) is one more snapshot change
    reload_file()  transactional: read, validate, resolve and build everything first; on any failure the
                   committed generation keeps serving with every verdict, the errors are logged once and
                   returned (the API answers 422); nothing raised reaches the event loop
    lame_duck()    not ready any more (/readyz 503) while DNS still answers
    await stop()   listeners closed -> API stopped -> probes cancelled

Logging is configured by the CLI, not here.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gslbd.answer import View
from gslbd.app.answered import AnsweredSites
from gslbd.app.audit import AuditTask
from gslbd.app.bulk import BulkResult, candidate_view, plan
from gslbd.app.changes import ChangeRecorder
from gslbd.app.checksets import CheckGauges, combined
from gslbd.app.control import AppControl
from gslbd.app.delays import DelayKeeper
from gslbd.app.endpoints import OverlayKeeper, overlay_changes
from gslbd.app.front import DnsFront
from gslbd.app.gauges import ServiceGauges
from gslbd.app.generation import Generation, GenerationBuilder, NewConfig, NewSnapshot, Resolved, resolve
from gslbd.app.privileges import drop_after_bind
from gslbd.app.push import PushWatch, is_push, pushed_unit
from gslbd.app.reconcile import endpoint_key, loaded_endpoints, unchanged_keys, vote_owners
from gslbd.app.safety import SafetyGauges, check_admin, check_endpoints, check_reload
from gslbd.app.startup import privilege_problems, store_for
from gslbd.app.usable import unusable, zone_problems
from gslbd.app.verdicts import VerdictSaver, seed
from gslbd.app.votes import VoteGauges
from gslbd.clock import Clock, SystemClock
from gslbd.cluster import ClusterNode
from gslbd.config import check_config, overlay_change
from gslbd.config.overlay_change import OverlayRefused
from gslbd.errors import ConfigError, GslbdError, NotPushed, Problem, StateError
from gslbd.exchange import Exchange
from gslbd.gcpause import keep_long_lived
from gslbd.health.fsm import step
from gslbd.health.scheduler import HealthScheduler
from gslbd.metrics import (
    ADMIN_CHANGES,
    CONFIG_LAST_RELOAD_SUCCESS,
    CONFIG_RELOAD_FAILURES,
    CONFIG_RELOADS,
    NAMES_PENDING,
    TABLE_REBUILD_SECONDS,
    TABLE_REBUILDS,
    TRANSITIONS,
)
from gslbd.model.config import Config
from gslbd.model.overlay import Overlay, OverlayEntry, OverlayOp
from gslbd.model.selector import Selector
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.policy import PolicyEnv
from gslbd.policy.load import NO_LOAD, missed, observe
from gslbd.server.build import FILL_SECONDS
from gslbd.server.workers import WorkerPool
from gslbd.state.book import HealthBook
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import ProbeResult
from gslbd.state.store import FileStateStore, KeptVerdict, StateStore, with_changes
from gslbd.types import AdminState
from gslbd.wire import AnswerTable, Responder
from gslbd.wire.ctable import python_only_notice

log = logging.getLogger(__name__)

# `unusable` and `zone_problems` live in app/usable.py (light: what `gslbd check` imports); kept here too.
__all__ = ["ApiBindError", "App", "state_file_problems", "unusable", "zone_problems"]


if TYPE_CHECKING:
    from gslbd.api.server import ApiServer


class ApiBindError(GslbdError):
    """The admin API's address could not be bound."""


def state_file_problems(old: Config, new: Config) -> list[str]:
    """A reload that names another state file: that file must be readable now (it is used from the
    next restart on; the running instance keeps the store it started with)."""
    path = new.state.file
    if path is None or path == old.state.file:
        return []
    try:
        FileStateStore(path).load_admin()
    except StateError as exc:
        return [f"{new.source}: state.file: {exc}"]
    return []


# Up to this many services the console's rows are read when the API starts (api/server.py).
WARM_ROWS_SERVICES = 10_000


class App:
    """One gslbd instance. Building it resolves the config (ConfigError when unusable); `start` binds."""

    def __init__(
        self,
        config: Config,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        *,
        worker_log_level: int = logging.WARNING,
        store: StateStore | None = None,
    ) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.rng = rng if rng is not None else random.Random()
        local = store if store is not None else store_for(config)
        self.store: StateStore = local
        self.cluster: ClusterNode | None = None
        if config.cluster is not None:
            self.cluster = ClusterNode(
                config.cluster.redis,
                self.clock,
                self._on_result,
                self._on_cluster_admin,
                local_store=local,
                on_overlay=self._on_cluster_overlay,
                on_load=self._on_load,
            )
            self.store = self.cluster.store
        self.book = HealthBook()
        self._vote_gauges = VoteGauges()
        self._builder = GenerationBuilder()
        resolved = resolve(config, self.rng)
        self.endpoints = OverlayKeeper(config)  # the endpoint overlay (app/endpoints.py), read at start
        self._overlay_lock = asyncio.Lock()
        self._kept: Mapping[EndpointKey, KeptVerdict] = {}  # the verdicts kept by the last run, in start
        self._configure_quorum(resolved)
        self._generation = self._builder.first(resolved, self.book.snapshot(taken_at=self.clock.wall()))
        self.book.take_touched()
        gen = self._generation
        responder = Responder(gen.table, gen.view, random.Random(self.rng.getrandbits(64)))
        self._front = DnsFront(responder, worker_log_level)
        self.stats = self._front.stats
        self._api: ApiServer | None = None
        self._scheduler: HealthScheduler | None = None
        # A single node keeps its verdicts in its state file (app/verdicts.py); cluster mode in Redis.
        self._verdicts_store = local if isinstance(local, FileStateStore) and self.cluster is None else None
        self._saver: VerdictSaver | None = None
        self._push = PushWatch(self.clock, self._on_result)  # checks of type push (app/push.py)
        self._rebuild_handle: asyncio.Handle | None = None
        self._delays = DelayKeeper()  # failover_delay / failback_delay (app/delays.py)
        self._expiry_handle: asyncio.TimerHandle | None = None  # when the earliest hold ends
        self._fill_handle: asyncio.Handle | None = None  # compiling a large view's names in steps
        self._fill_began: float | None = None
        self._resign_handle: asyncio.TimerHandle | None = None  # DNSSEC re-signing (docs/dnssec.md)
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start(): where NOTIFY re-polls run
        self._ready = False
        self._gauges = ServiceGauges()
        self._check_gauges = CheckGauges()  # gslbd_endpoint_check_up (app/checksets.py)
        self._gauges.update(gen)
        self._sites = AnsweredSites()  # the sites answered and failover events (app/answered.py)
        self._sites.update(gen)
        self._safety = SafetyGauges()
        self._safety.update(gen)
        self.changes = ChangeRecorder(self.clock)  # the console's change log (app/changes.py)
        self._audit = AuditTask(lambda: self.config, random.Random())  # audit: (its sample, not self.rng's)
        self.control = AppControl(self)
        # Query IDs and ports towards peers: unpredictable, and not drawn from self.rng.
        self.exchange = Exchange(
            config, self.clock, random.Random(), on_peers=self._on_peers, on_beat=self._on_beat
        )
        CONFIG_LAST_RELOAD_SUCCESS.set(1)

    @property
    def generation(self) -> Generation:
        """The committed generation: what DNS answers from and what operators see, now."""
        return self._generation

    @property
    def config(self) -> Config:
        return self._generation.config

    @property
    def snapshot(self) -> Snapshot:
        return self._generation.snapshot

    @property
    def env(self) -> PolicyEnv:
        return self._generation.env

    @property
    def view(self) -> View:
        return self._generation.view

    @property
    def table(self) -> AnswerTable:
        return self._generation.table

    @property
    def responder(self) -> Responder:
        return self._front.responder

    @property
    def workers(self) -> WorkerPool | None:
        return self._front.workers

    @property
    def api(self) -> ApiServer | None:
        return self._api

    @property
    def running(self) -> bool:
        return self._front.running

    @property
    def ready(self) -> bool:
        """True once the listeners are bound and the first snapshot is built; False again in lame duck."""
        return self._ready

    @property
    def bound(self) -> list[str]:
        """What is listening, as "udp://127.0.0.1:5353" strings (the workers' when there are workers)."""
        return self._front.bound

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the stored admin states, bind UDP and TCP on every listen address, start the API (in
        cluster mode before the start-up sync with Redis, which can take its timeout) and start
        probing. StateError when the state store cannot be read; OSError/WorkerError when a socket
        cannot be bound (ApiBindError: the API's). On failure nothing is left listening."""
        if self.running:
            return
        for key, state in self.store.load_admin().items():
            self.book.set_admin(key, state)
        kept = self._verdicts_store.load_verdicts() if self._verdicts_store is not None else {}
        self._kept = kept  # what the overlay's config seeds from (before `initial: down` would)
        self._apply_overlay(self.store.load_overlay())
        self._kept = {}
        seed(self.book, self._generation.resolved, kept, self.clock.wall())
        self._check_gauges.update(self.book, self._generation.resolved.probed)
        self._rebuild()
        try:
            if self.cluster is not None:  # Redis: connect, subscribe, seed health and admin states
                await self._start_api()  # /readyz says 503 while the start-up sync runs
                self.cluster.update_loads(self.config, loaded_endpoints(self.config))
                await self.cluster.start(self.config, self._probes())
                for key, state in self.store.load_admin().items():
                    self.book.set_admin(key, state)
                self._apply_overlay(self.store.load_overlay())  # Redis's, where it has one
                self._rebuild()
            # This site's exchange zones are served from the first answer: a peer whose first poll
            # found none would poll it name by name until it looks again.
            self.exchange.prepare(self._generation.publication, self._generation.config)
            self.responder.on_exchange = self.exchange.hook()
            # NOTIFY is answered by the one rule from the first answer (a peer's first poll comes when
            # the exchange starts below), never NOTIMP while the rest starts
            self.responder.on_notify = self._notify_hook if self.exchange.enabled else None
            if (notice := python_only_notice()) is not None:  # once, before the first answer
                log.warning(notice)
            await self._front.bind(self._generation)
            # DNS answers from here on; the API (and aiohttp, imported for it only now: a start at
            # 100,000 services answers that much sooner) follows, unless a start-up sync needed it.
            if self._api is None:
                await self._start_api()
        except BaseException:
            await self._front.close()
            if self.cluster is not None:
                await self.cluster.stop()
            await self._stop_api()
            raise
        drop_after_bind(self.config)  # run_as: every socket is bound, no probe has run yet
        scheduler = HealthScheduler(
            self.clock,
            random.Random(self.rng.getrandbits(64)),
            self._on_result,
            gate=self.cluster,
            on_load=self._on_load,
            load_gate=self.cluster,
        )
        await scheduler.start(self._probes())
        scheduler.update_loads(loaded_endpoints(self.config))
        self._scheduler = scheduler
        self._push.update(self._generation.resolved.probed.values())
        self._push.start()
        if self._verdicts_store is not None:
            self._saver = VerdictSaver(self._verdicts_store, self.book)
            self._saver.start()
        self._loop = asyncio.get_running_loop()
        self.responder.on_notify = self._notify_hook if self.exchange.enabled else None
        if self.workers is not None:  # the workers answer NOTIFY themselves and pass it on
            self.workers.on_notify = self.exchange.notify_received
        await self.exchange.start(self._generation.publication, self._generation.config)
        self.responder.on_exchange = self.exchange.hook()  # serves this site's exchange zones
        self._schedule_resign()
        self._schedule_fill()
        self._ready = True
        self._audit.start()
        resolved = self._generation.resolved
        log.info("ready: %d endpoints probed by %d probes", len(resolved.probed), len(resolved.targets))

    def _probes(self) -> list[Endpoint]:
        """One endpoint per probe target: the scheduler and the cluster gate run these only (push
        checks are fed by the API: app/push.py)."""
        resolved = self._generation.resolved
        return [resolved.probed[key] for key in resolved.targets if not is_push(resolved.probed[key])]

    def lame_duck(self) -> None:
        """Stop being ready (/readyz answers 503) while DNS keeps answering; `stop` follows."""
        if self._ready:
            log.info("lame duck: not ready, still answering DNS")
        self._ready = False

    async def shutdown(self, lame_duck: float | None = None) -> None:
        """Lame duck for `lame_duck` seconds (default dns.lame_duck), then stop."""
        self.lame_duck()
        seconds = self.config.dns.lame_duck if lame_duck is None else lame_duck
        if seconds > 0 and self.running:
            await asyncio.sleep(seconds)
        await self.stop()

    async def stop(self) -> None:
        """Stop answering: close every socket (and worker), then the API, then cancel the probes."""
        self._ready = False
        await self._front.close()
        await self._stop_api()
        self._push.stop()
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            await scheduler.stop()
        saver, self._saver = self._saver, None
        if saver is not None:
            await saver.close()
        await self.exchange.stop()
        await self._audit.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        for handle in (self._rebuild_handle, self._fill_handle, self._expiry_handle):
            if handle is not None:
                handle.cancel()
        self._rebuild_handle = self._fill_handle = self._expiry_handle = None
        if self._resign_handle is not None:
            self._resign_handle.cancel()
            self._resign_handle = None
        self._gauges.clear()
        self._check_gauges.clear()
        self._sites.clear()
        self._safety.clear()

    async def _start_api(self) -> None:
        api = self.config.api
        if api is None:
            return
        from gslbd.api.server import ApiServer  # imported when needed: see start

        warm = len(self.config.services) <= WARM_ROWS_SERVICES
        server = ApiServer(self.control, api.listen, api.token, warm_rows=warm)
        try:
            await server.start()
        except OSError as exc:
            raise ApiBindError(f"cannot listen on api.listen {api.listen}: {exc}") from exc
        self._api = server

    async def _stop_api(self) -> None:
        api, self._api = self._api, None
        if api is not None:
            await api.stop()

    # -- generations -----------------------------------------------------------------------------

    def _commit(self, generation: Generation) -> None:
        """Make `generation` the one in force (one assignment), then tell every consumer."""
        self._generation = generation
        self._front.publish(generation)
        self._gauges.update(generation)
        self._sites.update(generation)
        self._safety.update(generation)
        self.exchange.after_commit(generation.notify_zones, generation.publication, generation.config)
        self._schedule_fill()

    def _schedule_fill(self) -> None:
        """While the committed table is partial (a large view, server/build.py), compile more of its
        names on each turn of the event loop."""
        if self._fill_handle is not None or not self._builder.filling:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not started yet: start() schedules it
            return
        if self._fill_began is None:
            self._fill_began = time.perf_counter()
        self._fill_handle = loop.call_soon(self._fill_tick)

    def _fill_tick(self) -> None:
        self._fill_handle = None
        try:
            wanted = self._front.responder.take_wanted()  # the names clients asked for, first
            generation = self._builder.fill(self._generation, FILL_SECONDS, wanted=wanted)
        except Exception:
            log.exception("compiling names failed; the slow path answers them until the next full build")
            return
        if generation is not None:  # the same answers, more of them precompiled: only DNS needs it
            self._generation = generation
            self._front.responder.swap(generation.table, generation.view, lag=True)
            keep_long_lived()  # the new nodes live on: keep full collections from scanning them
        NAMES_PENDING.set(self._builder.pending)
        if not self._builder.filling and self._fill_began is not None:
            log.info(
                "every name is compiled: %d names, %.1f s after the build",
                len(self._generation.table.names),
                time.perf_counter() - self._fill_began,
            )
            self._fill_began = None
        self._schedule_fill()

    def _advance(self, snapshot: Snapshot, touched: frozenset[str] | None) -> bool:
        """Build and commit the generation of a new snapshot. A build that fails is logged and the
        committed generation keeps serving (the next change builds everything)."""
        began = time.perf_counter()
        try:
            generation = self._builder.next(self._generation, NewSnapshot(snapshot, touched))
        except Exception:
            log.exception(
                "building the answers of snapshot %d failed; still answering from the previous one",
                snapshot.version,
            )
            return False
        self._commit(generation)
        TABLE_REBUILDS.inc()
        TABLE_REBUILD_SECONDS.observe(time.perf_counter() - began)
        return True

    def refresh(self) -> None:
        """Answer from the health book's state now (for changes made to `book` directly)."""
        self._rebuild()

    def _rebuild(self) -> None:
        """Answer from the book's next snapshot, now: with the delays that hold answers now
        (app/delays.py), and a rebuild scheduled for when the earliest of them ends."""
        self._rebuild_handle = None
        now = self.clock.wall()
        self._schedule_expiry(self._delays.update(self.config, self.book, now), now)
        touched = self.book.take_touched()
        if self._advance(self.book.snapshot(taken_at=now), touched) and self.book.quorum is not None:
            self._vote_gauges.update(self.book, touched)

    def _schedule_expiry(self, at: float | None, now: float) -> None:
        """One rebuild when the earliest failover/failback hold ends (none when nothing is held)."""
        if self._expiry_handle is not None:
            self._expiry_handle.cancel()
            self._expiry_handle = None
        if at is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not serving yet: start() rebuilds, and schedules then
            return
        self._expiry_handle = loop.call_later(max(0.001, at - now), self._rebuild)

    def _schedule_resign(self) -> None:
        """DNSSEC: rebuild when the earliest cached signature is due for refresh (the builder then
        compiles every name and re-signs what is due), checked at least hourly."""
        at = self._builder.resign_at()
        if at is None or self._loop is None:
            return
        delay = min(3600.0, max(1.0, at - self.clock.wall()))
        self._resign_handle = self._loop.call_later(delay, self._resign_tick)

    def _resign_tick(self) -> None:
        self._resign_handle = None
        if self._builder.resign_due():
            self._rebuild()
        self._schedule_resign()

    def _schedule_rebuild(self) -> None:
        """One rebuild on the next turn of the event loop, however many verdicts arrive before it."""
        if self._rebuild_handle is None:
            self._rebuild_handle = asyncio.get_running_loop().call_soon(self._rebuild)

    # -- health ----------------------------------------------------------------------------------

    def _on_result(self, endpoint: Endpoint, result: ProbeResult) -> None:
        """A probe finished: step its target's verdict machine and record the verdict for every endpoint
        sharing that probe; a changed verdict schedules a rebuild."""
        resolved = self._generation.resolved
        current = resolved.probed.get(endpoint.key)
        check = endpoint.check
        if current is None or check is None or current.check != check:
            return  # a result for an endpoint that a reload removed or re-checked
        sharing = resolved.targets.get(endpoint.key, (endpoint.key,))
        before = self.book.status(endpoint.key)
        now = self.clock.wall()
        after = step(before, result, now, check.rise, check.fall, check.window)
        if endpoint.unit:  # one check of several (app/checksets.py): the endpoint's verdict combines them
            self.book.record_check(endpoint.key, after)
            self._check_gauges.set(endpoint, after)
            if after.healthy != before.healthy and self._saver is not None:
                self._saver.changed()
            sharing = (endpoint.endpoint_key,)
            before = self.book.status(endpoint.endpoint_key)
            after = combined(self.book, endpoint, now)
        changed = False
        for key in sharing:
            changed |= self.book.record(key, after)
        if not changed:
            return
        TRANSITIONS.labels(to="up" if after.healthy else "down").inc()
        if self._saver is not None:
            self._saver.changed()
        for key in sharing:  # the console's change log: every endpoint the verdict applies to
            self.changes.verdict(key, after.healthy, after.last_change_reason)
        if before.healthy is not None or not after.healthy:
            others = (
                f" (and {len(sharing) - 1} more endpoints of the same target)" if len(sharing) > 1 else ""
            )
            verdict = "up" if after.healthy else "down"
            reason = after.last_change_reason
            log.info(
                "%s %s is %s: %s%s",
                endpoint.service,
                endpoint.address,
                verdict,
                reason,
                others,
                extra={
                    "event": "verdict",
                    "service": endpoint.service,
                    "endpoint": endpoint.address,
                    "verdict": verdict,
                    "reason": reason,
                    "sharing": len(sharing),
                },
            )
        self._schedule_rebuild()

    def _on_load(self, endpoint: Endpoint, figure: float | None, why: str) -> None:
        """A load fetch finished (health/scheduler.py): the endpoint's load state steps (policy/load.py);
        a change of what the answers use schedules a rebuild of its service only."""
        service = self._generation.resolved.services.get(endpoint.service)
        current = (
            None if service is None else next((e for e in service.endpoints if e.key == endpoint.key), None)
        )
        source = endpoint.load
        if current is None or source is None or current.load != source:
            return  # a figure for an endpoint that a reload removed or gave another load source
        assert service is not None
        before = self.book.load(endpoint.key) or NO_LOAD
        now = self.clock.monotonic()
        if figure is not None:
            after = observe(before, figure, now, source, service.shed_load)
        else:
            after = missed(before, now, why, source, service.shed_load)
        if self.book.set_load(endpoint.key, after):
            self._schedule_rebuild()

    # -- exchange --------------------------------------------------------------------------------

    def _configure_quorum(self, resolved: Resolved) -> None:
        """peers.quorum: the votes K and the owner site of every endpoint voted on (state/quorum.py)."""
        config = resolved.config
        votes = config.peers.quorum if config.peers is not None else None
        owners = vote_owners(config, resolved.probed.values()) if votes is not None else {}
        self.book.configure_quorum(votes, config.site.name, owners)
        self._vote_gauges.configure(owners)

    def _on_peers(self) -> None:
        """The endpoints learned from peer sites, their votes or the partition state changed: answered
        on the next loop turn (partitioned first: the votes heard before it then stay)."""
        peers = self.exchange.book
        if self.book.quorum is not None:
            self.book.set_partitioned(peers.partitioned)
            self.book.set_peer_votes(peers.votes())
        self.book.set_peer_endpoints(self.exchange.endpoints())
        self.book.set_peer_loads(peers.loads())
        self.changes.peers()
        self._schedule_rebuild()

    def _notify_hook(self, zone: str, ip: int, v6: bool) -> bool:
        """A NOTIFY reached the responder. UDP is answered on a thread of its own (server/udp.py), so
        the verdict is read there and the re-poll is handed to the event loop."""
        loop = self._loop
        if loop is None:  # still starting: every peer's first poll is yet to come
            return self.exchange.notify_early(zone, ip, v6)
        loop.call_soon_threadsafe(self.exchange.notify_received, zone, ip, v6)
        return self.exchange.notify_accepted(zone, ip, v6)

    def _on_beat(self) -> None:
        """Heartbeat tick (every peers.interval/2): health evaluation is alive; the heartbeat record is
        refreshed through the same path as every change (only the heartbeat names are rebuilt)."""
        if self._scheduler is None:
            return
        self.book.set_evaluated(self.clock.wall())
        self._rebuild()

    # -- admin -----------------------------------------------------------------------------------

    def _on_cluster_admin(self, key: EndpointKey, state: AdminState) -> None:
        """Another instance changed an admin state (cluster mode): answered on the next loop turn."""
        if self.book.set_admin(key, state):
            self._admin_changed(key, state, "cluster")
            self._schedule_rebuild()

    def _admin_changed(self, key: EndpointKey, state: AdminState, by: str) -> None:
        """Log an admin change (with its structured fields) and add it to the change log."""
        who = " by another instance" if by == "cluster" else ""
        log.info(
            "admin state of %s %s set to %s%s",
            key[0],
            key[1],
            state.value,
            who,
            extra={"event": "admin", "service": key[0], "endpoint": key[1], "state": state.value, "by": by},
        )
        self.changes.admin(key, state, "another instance" if by == "cluster" else "api")

    async def set_admin(
        self, service: str, address: str, state: AdminState, force: bool = False
    ) -> EndpointKey:
        """Set an endpoint's run-time admin state: stored, then answered before this returns.
        KeyError for an unknown service or endpoint; StateError when the store cannot keep it;
        SafetyRefused when it would break a safety rule and is not forced (app/safety.py)."""
        key = endpoint_key(self.config, service, address)
        check_admin(self._generation, {key: state}, force)
        self.store.save_admin(key, state)
        if self.cluster is not None:  # in Redis (and so at every instance) before this returns
            await self.cluster.flush_admin()
        self.book.set_admin(key, state)
        ADMIN_CHANGES.labels(state=state.value).inc()
        self._admin_changed(key, state, "api")
        self._rebuild()
        return key

    async def set_admin_bulk(
        self, selector: Selector, state: AdminState, force: bool = False, dry_run: bool = False
    ) -> BulkResult:
        """Set `state` on every endpoint of the config that `selector` picks, in one generation: each
        changed key stored (and in Redis before this returns), one rebuild. SelectorMatchesNothing,
        SafetyRefused (unless forced) and StateError as set_admin; `dry_run` checks and reports the same
        and changes nothing."""
        generation = self._generation
        found = plan(self.config.services, generation.snapshot, selector, state)
        if not (dry_run and force):
            check_admin(generation, found.changes, force and not dry_run)
        before = generation.view
        if dry_run:
            return BulkResult(found, generation.number, before, candidate_view(generation, found.changes))
        self.store.save_admins(found.changes)  # one write: all or (StateError) none
        if self.cluster is not None and found.changes:
            await self.cluster.flush_admin()
        for key in found.changes:
            self.book.set_admin(key, state)
            ADMIN_CHANGES.labels(state=state.value).inc()
            self._admin_changed(key, state, "api")
        if found.changes:
            self._rebuild()
        return BulkResult(found, self._generation.number, before, self.view)

    # -- the endpoint overlay --------------------------------------------------------------------

    async def change_endpoints(
        self, op: OverlayOp, service: str, address: str, value: Mapping[str, Any] | None, force: bool = False
    ) -> tuple[EndpointKey, list[Problem]]:
        """Add (`op` ADD, `value` the endpoint's mapping), remove (REMOVE) or patch (PATCH, `value` the
        keys to replace) an endpoint of `service` through the overlay (app/endpoints.py): stored (in
        Redis too, in cluster mode), then answered in one generation before this returns; probes start
        and stop with the endpoints. The endpoint's key and the warnings found. OverlayRefused (404,
        409, 422), SafetyRefused (unless `force`) and StateError change nothing."""
        async with self._overlay_lock:
            base, entries = self.endpoints.base, self.endpoints.entries
            if op is OverlayOp.ADD:
                new, key, warnings = overlay_change.add(base, entries, service, value)
            elif op is OverlayOp.REMOVE:
                new, key, warnings = overlay_change.remove(base, entries, service, address)
            else:
                new, key, warnings = overlay_change.patch(base, entries, service, address, value or {})
            merged = self.endpoints.merged_with(base, new)
            try:
                resolved = resolve(
                    merged.config, random.Random(self.rng.getrandbits(64)), self._generation.resolved
                )
            except ConfigError as exc:
                raise OverlayRefused(422, f"not changed: {exc}") from None
            cannot = privilege_problems(merged.config, resolved.probed)
            if cannot:  # an icmp check this process may not run
                raise OverlayRefused(422, "not changed: " + "; ".join(cannot))
            check_endpoints(self._generation, resolved, force, f"{op} of endpoint {key[0]} {key[1]}")
            self.store.save_overlay(overlay_changes(entries, new))
            errors = self._apply_config(resolved, reloaded=False)
            if errors:  # a bug: the answers of a validated overlay could not be built
                raise RuntimeError("; ".join(errors))
            self.endpoints.commit(merged, base, self.store)
            log.info(
                "endpoint %s %s: %s by the API",
                key[0],
                key[1],
                op.done,
                extra={
                    "event": "overlay",
                    "service": key[0],
                    "endpoint": key[1],
                    "op": op.value,
                    "by": "api",
                },
            )
            self.changes.endpoint(key, op.done, "api")
        if self.cluster is not None:  # in Redis (and so at every instance) before this returns
            await self.cluster.flush_overlay()
        return key, warnings

    def _apply_overlay(self, entries: Overlay) -> None:
        """Answer from the config file merged with `entries` (the stored overlay at start, or one that
        another instance changed). Entries the config does not allow are dropped (and logged)."""
        if not entries and not self.endpoints.entries:
            return
        base = self.endpoints.base
        merged = self.endpoints.merged_with(base, entries)
        try:
            resolved = resolve(
                merged.config, random.Random(self.rng.getrandbits(64)), self._generation.resolved
            )
        except ConfigError as exc:
            log.error("endpoint overlay not applied: %s", exc)
            return
        if not self._apply_config(resolved, reloaded=False):
            self.endpoints.commit(merged, base, self.store)

    def _on_cluster_overlay(self, changes: Mapping[EndpointKey, OverlayEntry | None]) -> None:
        """Another instance changed the endpoint overlay (cluster mode): answered now."""
        for key, entry in changes.items():
            what = "removed from the overlay" if entry is None else f"{entry.op.done} in the overlay"
            fields = {"event": "overlay", "service": key[0], "endpoint": key[1], "by": "cluster"}
            fields["op"] = "forget" if entry is None else entry.op.value
            log.info("endpoint %s %s: %s by another instance", key[0], key[1], what, extra=fields)
            self.changes.endpoint(key, "removed" if entry is None else entry.op.done, "another instance")
        self._apply_overlay(with_changes(self.endpoints.entries, changes))

    # -- reload ----------------------------------------------------------------------------------

    def push_health(
        self, service: str, address: str, ok: bool, detail: str, check: str | None = None
    ) -> EndpointKey:
        """A result pushed for a `type: push` endpoint (POST /api/v1/health/...), applied now.
        KeyError for an unknown service or endpoint, NotPushed when the endpoint's check is not a push
        check here (another type, none, or an endpoint of a peer site). An endpoint with several
        `checks` takes it for its push check (`check` names it when there are several)."""
        resolved = self._generation.resolved
        found = resolved.services.get(service)
        endpoint = None if found is None else next((e for e in found.endpoints if e.address == address), None)
        if found is None or endpoint is None:
            raise KeyError((service, address))
        if endpoint.checks is not None:
            unit = pushed_unit(endpoint, resolved.probed, check)
            self._push.push(unit.key, ok, detail)
            return endpoint.key
        probed = resolved.probed.get(endpoint.key)
        if probed is None or not is_push(probed):
            kind = None if probed is None or probed.check is None else probed.check.type
            what = "not checked at this site" if kind is None else f"checked by type {kind}"
            raise NotPushed(f"{service} {address} is {what}, not by a push check")
        self._push.push(endpoint.key, ok, detail)
        return endpoint.key

    def reload(self, config: Config) -> None:
        """Answer from a new config from now on (see `_apply_config`). ConfigError when it cannot be
        used; the committed generation then keeps serving."""
        problems = zone_problems(self.config, config)
        if problems:
            raise ConfigError(problems)
        rng = random.Random(self.rng.getrandbits(64))
        merged = self.endpoints.merged_with(config)
        errors = self._apply_config(resolve(merged.config, rng, self._generation.resolved))
        if errors:
            raise ConfigError([Problem(config.source, None, "", line) for line in errors])
        self.endpoints.commit(merged, config, self.store)

    def _apply_config(self, resolved: Resolved, *, reloaded: bool = True) -> list[str]:
        """Build the generation of a resolved config and commit it; the error lines when the build
        fails (nothing changed then). Admin overrides are kept, and so is the health of endpoints probed
        with the same check at the same address under both configs; the probes follow. Listen
        addresses, workers, the API address and the cluster only change with a restart."""
        old = self.config
        config = resolved.config
        keep = unchanged_keys(self._generation.resolved.probed, resolved.probed)
        snapshot = self.book.snapshot(keep=keep, taken_at=self.clock.wall())
        began = time.perf_counter()
        try:
            change = NewConfig(resolved, snapshot, self.book.pending())
            generation = self._builder.next(self._generation, change)
        except Exception as exc:
            log.exception("building the answers of %s failed", config.source)
            return [f"{config.source}: the answers could not be built: {exc!r}"]
        self.book.retain(keep)
        self.book.take_touched()
        self._commit(generation)
        TABLE_REBUILDS.inc()
        TABLE_REBUILD_SECONDS.observe(time.perf_counter() - began)
        self._after_config(old, config, reloaded)
        if reloaded:
            self.changes.reload_applied(config.source)
        return []

    def _after_config(self, old: Config, config: Config, reloaded: bool = True) -> None:
        """What follows a committed config: warnings for what needs a restart, the exchange, the
        scheduler and the cluster gate. Each is guarded: the new generation already serves. After an
        endpoint overlay change (not `reloaded`) the answers are built again only when that changed
        a verdict (a new probe that starts down): the change is one generation."""
        if self.running and (config.dns.listen, config.dns.workers, config.dns.threads) != (
            old.dns.listen,
            old.dns.workers,
            old.dns.threads,
        ):
            log.warning("dns.listen, dns.workers and dns.threads changes take effect at the next restart")
        if self.running and config.api != old.api:
            log.warning("api changes take effect at the next restart")
        if self.running and config.cluster != old.cluster:
            log.warning("cluster changes take effect at the next restart")
        if self.running and config.state != old.state:
            log.warning(
                "state changes take effect at the next restart; admin states stay in %s", old.state.file
            )
        resolved = self._generation.resolved
        for key, group in resolved.targets.items():  # endpoints that joined a probed target share its verdict
            status = self.book.known(key) or next(
                (self.book.known(k) for k in group if self.book.known(k)), None
            )
            if status is not None:
                for member in group:
                    if self.book.known(member) != status:
                        self.book.record(member, status)
        seed(self.book, resolved, self._kept, self.clock.wall())  # new targets whose check starts them down
        self._check_gauges.update(self.book, resolved.probed)
        self._configure_quorum(resolved)
        try:
            if self.exchange.update(config):  # peers came or went
                self.book.set_peer_endpoints(self.exchange.endpoints())
            if self.running:
                self.responder.on_notify = self._notify_hook if self.exchange.enabled else None
                self.responder.on_exchange = self.exchange.hook()  # peers.transfer may have changed
            if self.cluster is not None:
                self.cluster.update(config, self._probes())
                self.cluster.update_loads(config, loaded_endpoints(config))
            if self._scheduler is not None:
                self._scheduler.update(self._probes())
                self._scheduler.update_loads(loaded_endpoints(config))
            self.book.retain_loads({e.key for e in loaded_endpoints(config)})
            self._push.update(resolved.probed.values())
        except Exception:
            log.exception("following the new configuration failed in part; its answers are served")
        if reloaded or self.book.pending() != frozenset():
            self._rebuild()

    async def reload_file(self, force: bool = False) -> list[str]:
        """Re-read the config file this instance was started from and apply it, all or nothing.
        Returns the error lines (logged once); an empty list means the new config is answering.
        A config that would break a safety rule is refused unless `force`. Never raises."""
        path = self.config.source
        try:
            async with self._overlay_lock:  # an endpoint change meanwhile would be merged with the old file
                errors, warnings = await self._load_and_apply(path, force)
        except Exception as exc:  # a bug: still nothing may reach the event loop
            log.exception("reload of %s failed", path)
            errors, warnings = [f"{path}: reload failed: {exc!r}"], []
        if not errors:
            for warning in warnings:
                log.warning("%s", warning)
            log.info(
                "reloaded %s (generation %d)",
                path,
                self._generation.number,
                extra={"event": "reload", "result": "applied", "path": path},
            )
            CONFIG_RELOADS.labels(result="applied").inc()
            CONFIG_LAST_RELOAD_SUCCESS.set(1)
            return []
        count = f"{len(errors)} error" + ("" if len(errors) == 1 else "s")
        log.error(
            "reload of %s refused (%s); still serving the previous config:\n  %s",
            path,
            count,
            "\n  ".join(errors),
            extra={"event": "reload", "result": "refused", "path": path, "errors": errors},
        )
        CONFIG_RELOADS.labels(result="refused").inc()
        CONFIG_RELOAD_FAILURES.inc()
        CONFIG_LAST_RELOAD_SUCCESS.set(0)
        self.changes.reload_refused(path, errors)
        return errors

    async def _load_and_apply(self, path: str, force: bool = False) -> tuple[list[str], list[str]]:
        """(errors, warnings) of reading, validating, resolving and committing `path`."""
        if path.startswith("<"):
            return [f"{path}: the configuration was not read from a file; there is nothing to reload"], []
        config, problems = await asyncio.to_thread(check_config, path)
        errors = [str(p) for p in problems if p.severity == "error"]
        warnings = [str(p) for p in problems if p.severity != "error"]
        if config is None:
            return errors or [f"{path}: could not be loaded"], warnings
        errors = [str(p) for p in zone_problems(self.config, config)]
        errors += await asyncio.to_thread(state_file_problems, self.config, config)
        if errors:
            return errors, warnings
        rng = random.Random(self.rng.getrandbits(64))
        merged = self.endpoints.merged_with(config)  # the overlay kept on top of the new file
        try:
            resolved = await asyncio.to_thread(resolve, merged.config, rng, self._generation.resolved)
        except ConfigError as exc:
            return [str(p) for p in exc.problems], warnings
        errors = privilege_problems(merged.config, resolved.probed)
        errors = errors or check_reload(self._generation, resolved, force)
        if errors:
            return errors, warnings
        errors = self._apply_config(resolved)
        if not errors:
            self.endpoints.commit(merged, config, self.store)
        return errors, warnings
