"""The composition root: builds everything a running gslbd needs from one Config, in order.

    App(config, clock, rng, store=...)
      env       = policy.locate.build_env(config, rng)     where clients are, known sites
      book      = state.book.HealthBook()                  verdicts and run-time admin overrides
      snapshot  = book.snapshot()                          what the answers are built from
      builder   = server.build.AnswerBuilder()             view (every decided answer) and table (the
                                                           fast path's wire bytes); after the first build
                                                           only the names a new snapshot changed
      responder = wire.Responder(table, view, rng)         what the listeners call per message
    await start()  loads admin states from the store, starts the API (not ready yet), binds UDP+TCP on
                   every dns.listen address (in this process, or in dns.workers worker processes that
                   get every new config and snapshot over a pipe), starts the health scheduler; ready
    probe result -> health.fsm.step -> book.record; a changed verdict schedules ONE rebuild on the
                   event loop (call_soon: a burst of verdicts costs one rebuild), live within 100 ms
    set_admin()    store.save_admin + book.set_admin + rebuild, before it returns
    cluster mode   (config.cluster) a cluster.ClusterNode: start() connects to Redis, subscribes and seeds
                   the book from the shared health keys after the API is up (/readyz 503 meanwhile) and
                   before binding; it is the scheduler's probe gate, feeds shared results into
                   _on_result, and keeps admin states in Redis (self.store is its RedisStateStore)
    exchange       (config.peers) an exchange.Exchange: start() after binding polls the peer sites; their
                   published endpoints -> book.set_peer_endpoints -> rebuild; NOTIFY to the peers after
                   a rebuild that changed this site's localtargets; NOTIFY from peers answered by the
                   responder's hook; the heartbeat record refreshed every peers.interval/2 (the
                   builder recompiles only the heartbeat names)
    reload(config) / reload_file()   carry over the health of unchanged endpoints, rebuild, reschedule
    lame_duck()    not ready any more (/readyz 503) while DNS still answers
    await stop()   listeners closed -> API stopped -> probes cancelled

Logging is configured by the CLI, not here.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import replace

from gslbd.answer import View
from gslbd.api.server import ApiServer
from gslbd.app.control import AppControl
from gslbd.app.front import DnsFront
from gslbd.app.gauges import ServiceGauges
from gslbd.app.reconcile import endpoint_key, probed_endpoints, unchanged_keys
from gslbd.app.startup import privilege_problems, store_for
from gslbd.clock import Clock, SystemClock
from gslbd.cluster import ClusterNode
from gslbd.config import check_config
from gslbd.errors import GslbdError
from gslbd.exchange import Exchange
from gslbd.health.fsm import step
from gslbd.health.scheduler import HealthScheduler
from gslbd.metrics import ADMIN_CHANGES, CONFIG_RELOADS, TABLE_REBUILD_SECONDS, TABLE_REBUILDS, TRANSITIONS
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.policy import PolicyEnv
from gslbd.policy.locate import build_env
from gslbd.server.build import AnswerBuilder
from gslbd.server.workers import WorkerPool
from gslbd.state.book import HealthBook
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import ProbeResult
from gslbd.state.store import StateStore
from gslbd.types import AdminState
from gslbd.wire import AnswerTable, Responder

log = logging.getLogger(__name__)


class ApiBindError(GslbdError):
    """The admin API's address could not be bound."""


class App:
    """One gslbd instance. Building it validates nothing more than the config did; `start` binds."""

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
        self._config = config
        local = store if store is not None else store_for(config)
        self.store: StateStore = local
        self.cluster: ClusterNode | None = None
        if config.cluster is not None:
            self.cluster = ClusterNode(
                config.cluster.redis, self.clock, self._on_result, self._on_cluster_admin, local_store=local
            )
            self.store = self.cluster.store
        self.book = HealthBook()
        self._snapshot = self.book.snapshot()
        self._env = build_env(config, self.rng)
        self._builder = AnswerBuilder()
        self._view, self._table = self._builder.build(config, self._snapshot, self._env)
        responder = Responder(self._table, self._view, random.Random(self.rng.getrandbits(64)))
        self._front = DnsFront(responder, worker_log_level)
        self.stats = self._front.stats
        self._api: ApiServer | None = None
        self._scheduler: HealthScheduler | None = None
        self._probed = probed_endpoints(config)
        self._rebuild_handle: asyncio.Handle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # set by start(): where NOTIFY re-polls run
        self._ready = False
        self._gauges = ServiceGauges()
        self.control = AppControl(self)
        # Query IDs and ports towards peers: unpredictable, and not drawn from self.rng.
        self.exchange = Exchange(
            config, self.clock, random.Random(), on_peers=self._on_peers, on_beat=self._on_beat
        )

    @property
    def config(self) -> Config:
        return self._config

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def env(self) -> PolicyEnv:
        return self._env

    @property
    def view(self) -> View:
        return self._view

    @property
    def table(self) -> AnswerTable:
        return self._table

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
        """Load the stored admin states, start the API, bind UDP and TCP on every listen address and
        start probing. StateError when the state store cannot be read; OSError/WorkerError when a
        socket cannot be bound. On failure nothing is left listening."""
        if self.running:
            return
        for key, state in self.store.load_admin().items():
            self.book.set_admin(key, state)
        self._rebuild()
        api = self._config.api
        if api is not None:
            server = ApiServer(self.control, api.listen, api.token)
            try:
                await server.start()
            except OSError as exc:
                raise ApiBindError(f"cannot listen on api.listen {api.listen}: {exc}") from exc
            self._api = server
        try:
            if self.cluster is not None:  # Redis: connect, subscribe, seed health and admin states
                await self.cluster.start(self._config, list(self._probed.values()))
                for key, state in self.store.load_admin().items():
                    self.book.set_admin(key, state)
                self._rebuild()
            await self._front.bind(self._config, self._snapshot)
        except BaseException:
            if self.cluster is not None:
                await self.cluster.stop()
            await self._stop_api()
            raise
        scheduler = HealthScheduler(
            self.clock, random.Random(self.rng.getrandbits(64)), self._on_result, gate=self.cluster
        )
        await scheduler.start(list(self._probed.values()))
        self._scheduler = scheduler
        self._loop = asyncio.get_running_loop()
        self.responder.on_notify = self._notify_hook if self.exchange.enabled else None
        if self.workers is not None:  # the workers answer NOTIFY themselves and pass it on
            self.workers.on_notify = self.exchange.notify_received
        await self.exchange.start(self._snapshot)
        self.responder.on_exchange = self.exchange.hook()  # serves this site's exchange zones
        self._ready = True
        log.info("ready: %d endpoints probed", len(self._probed))

    def lame_duck(self) -> None:
        """Stop being ready (/readyz answers 503) while DNS keeps answering; `stop` follows."""
        if self._ready:
            log.info("lame duck: not ready, still answering DNS")
        self._ready = False

    async def shutdown(self, lame_duck: float | None = None) -> None:
        """Lame duck for `lame_duck` seconds (default dns.lame_duck), then stop."""
        self.lame_duck()
        seconds = self._config.dns.lame_duck if lame_duck is None else lame_duck
        if seconds > 0 and self.running:
            await asyncio.sleep(seconds)
        await self.stop()

    async def stop(self) -> None:
        """Stop answering: close every socket (and worker), then the API, then cancel the probes."""
        self._ready = False
        await self._front.close()
        await self._stop_api()
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            await scheduler.stop()
        await self.exchange.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self._rebuild_handle is not None:
            self._rebuild_handle.cancel()
            self._rebuild_handle = None
        self._gauges.clear()

    async def _stop_api(self) -> None:
        api, self._api = self._api, None
        if api is not None:
            await api.stop()

    # -- answers ---------------------------------------------------------------------------------

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """Answer from `snapshot` from now on: rebuild what changed of view and table and swap them in."""
        began = time.perf_counter()
        view, table = self._builder.build(self._config, snapshot, self._env)
        self._snapshot, self._view, self._table = snapshot, view, table
        self._front.publish(self._config, snapshot, view, table)
        TABLE_REBUILDS.inc()
        TABLE_REBUILD_SECONDS.observe(time.perf_counter() - began)
        change = self._builder.last_change
        only = None if change.full else change.services  # None: every service may have changed
        self._gauges.update(self._config, snapshot, only)
        self.exchange.after_rebuild(self._config, snapshot, only)

    def _rebuild(self) -> None:
        """Answer from the book's next snapshot, now."""
        self._rebuild_handle = None
        self.apply_snapshot(self.book.snapshot())

    def _schedule_rebuild(self) -> None:
        """One rebuild on the next turn of the event loop, however many verdicts arrive before it."""
        if self._rebuild_handle is None:
            self._rebuild_handle = asyncio.get_running_loop().call_soon(self._rebuild)

    # -- health ----------------------------------------------------------------------------------

    def _on_result(self, endpoint: Endpoint, result: ProbeResult) -> None:
        """A probe finished: step the endpoint's verdict machine; a changed verdict schedules a rebuild."""
        current = self._probed.get(endpoint.key)
        check = endpoint.check
        if current is None or check is None or current.check != check:
            return  # a result for an endpoint that a reload removed or re-checked
        before = self.book.status(endpoint.key)
        after = step(before, result, self.clock.wall(), check.rise, check.fall)
        if not self.book.record(endpoint.key, after):
            return
        TRANSITIONS.labels(to="up" if after.healthy else "down").inc()
        if before.healthy is not None or not after.healthy:
            log.info(
                "%s %s is %s: %s",
                endpoint.service,
                endpoint.address,
                "up" if after.healthy else "down",
                after.last_change_reason,
            )
        self._schedule_rebuild()

    # -- exchange --------------------------------------------------------------------------------

    def _on_peers(self) -> None:
        """The endpoints learned from peer sites changed: answered on the next loop turn."""
        self.book.set_peer_endpoints(self.exchange.endpoints())
        self._schedule_rebuild()

    def _notify_hook(self, zone: str, ip: int, v6: bool) -> bool:
        """A NOTIFY reached the responder. UDP is answered on a thread of its own (server/udp.py), so
        the verdict is read there and the re-poll is handed to the event loop."""
        loop = self._loop
        if loop is None:
            return False
        loop.call_soon_threadsafe(self.exchange.notify_received, zone, ip, v6)
        return self.exchange.notify_accepted(zone, ip, v6)

    def _on_beat(self) -> None:
        """Heartbeat tick (every peers.interval/2): health evaluation is alive; refresh the heartbeat
        record (the builder recompiles only the heartbeat names)."""
        if self._scheduler is None:
            return
        self.book.set_evaluated(self.clock.wall())
        snapshot = replace(self._snapshot, evaluated_at=self.book.evaluated_at)
        self._snapshot = snapshot
        self._view, self._table = self._builder.build(self._config, snapshot, self._env)
        self._front.publish(self._config, snapshot, self._view, self._table)

    # -- admin -----------------------------------------------------------------------------------

    def _on_cluster_admin(self, key: EndpointKey, state: AdminState) -> None:
        """Another instance changed an admin state (cluster mode): answered on the next loop turn."""
        if self.book.set_admin(key, state):
            log.info("admin state of %s %s set to %s by another instance", key[0], key[1], state.value)
            self._schedule_rebuild()

    async def set_admin(self, service: str, address: str, state: AdminState) -> EndpointKey:
        """Set an endpoint's run-time admin state: stored, then answered before this returns.
        KeyError for an unknown service or endpoint; StateError when the store cannot keep it."""
        key = endpoint_key(self._config, service, address)
        self.store.save_admin(key, state)
        if self.cluster is not None:  # in Redis (and so at every instance) before this returns
            await self.cluster.flush_admin()
        self.book.set_admin(key, state)
        ADMIN_CHANGES.labels(state=state.value).inc()
        log.info("admin state of %s %s set to %s", key[0], key[1], state.value)
        self._rebuild()
        return key

    # -- reload ----------------------------------------------------------------------------------

    def reload(self, config: Config) -> None:
        """Answer from a new config from now on. Admin overrides are kept, and so is the health of
        endpoints that are probed with the same check under both configs; the probes follow. Listen
        addresses, workers and the API address only change with a restart."""
        old = self._config
        if self.running and (config.dns.listen != old.dns.listen or config.dns.workers != old.dns.workers):
            log.warning("dns.listen and dns.workers changes take effect at the next restart")
        if self.running and config.api != old.api:
            log.warning("api changes take effect at the next restart")
        keep = unchanged_keys(old, config)
        dropped = any(key not in keep for key in self.book.statuses())
        self.book.retain(keep)
        self._config, self._env = config, build_env(config, self.rng)
        self._probed = probed_endpoints(config)
        if self.exchange.update(config):  # peers came or went
            self.book.set_peer_endpoints(self.exchange.endpoints())
            dropped = True
        if self.running:
            self.responder.on_notify = self._notify_hook if self.exchange.enabled else None
        if dropped:
            self._rebuild()
        else:
            self.apply_snapshot(self._snapshot)
        if self.running:
            self.responder.on_exchange = self.exchange.hook()  # peers.transfer may have changed
        if self.running and config.cluster != old.cluster:
            log.warning("cluster changes take effect at the next restart")
        if self.cluster is not None:
            self.cluster.update(config, list(self._probed.values()))
        if self._scheduler is not None:
            self._scheduler.update(list(self._probed.values()))
        CONFIG_RELOADS.labels(result="applied").inc()

    async def reload_file(self) -> list[str]:
        """Re-read the config file this instance was started from and apply it. Returns the error
        lines (logged too); an empty list means the new config is answering."""
        path = self._config.source
        if path.startswith("<"):
            errors = [f"{path}: the configuration was not read from a file; there is nothing to reload"]
        else:
            config, problems = await asyncio.to_thread(check_config, path)
            errors = [str(p) for p in problems if p.severity == "error"]
            if config is not None and not errors:
                errors = privilege_problems(config)
            if config is None and not errors:
                errors = [f"{path}: could not be loaded"]
            if not errors and config is not None:
                for warning in problems:
                    log.warning("%s", warning)
                self.reload(config)
                log.info("reloaded %s", path)
                return []
        for line in errors:
            log.error("%s", line)
        count = f"{len(errors)} error" + ("" if len(errors) == 1 else "s")
        log.error("reload of %s refused (%s, logged above); still serving the previous config", path, count)
        CONFIG_RELOADS.labels(result="refused").inc()
        return errors
