"""Cluster mode for one instance: shares raw health results and admin states through Redis.

    node = ClusterNode(config.cluster.redis, clock, feed, on_admin, local_store=store)
    await node.start(config, endpoints)   connect, SUBSCRIBE <prefix>health:updates + <prefix>admin:updates,
                                          exchange admin states, seed every endpoint from its health key
                                          (`feed` gets the raw result: the first verdict applies at once);
                                          Redis down: one warning, nothing seeded, local probing
    scheduler = HealthScheduler(..., gate=node)   per endpoint and cycle:
        node.delay(endpoint, first)      cycles aligned on the wall clock (cluster.cycles)
        await node.acquire(endpoint)     SET lock NX PX max(interval/2, 2s) (plus GET lock, GET + PTTL health
                                         in the same round trip). Won (or our own lock from the last
                                         cycle): True = probe here. Lost: the health key's value is fed
                                         (unless that result was fed already) and False = skip the probe;
                                         a missing key: True = probe here without sharing.
                                         sync_mode none, or Redis down: True.
        await node.publish(endpoint, r)  after a probe here that won the lock (or sync_mode none):
                                         SET health "1"/"0" PX 2 x interval, PUBLISH the JSON update;
                                         the scheduler sends this before it applies the result here
    messages on <prefix>health:updates   fed (lock mode) unless it is our own echo or its cycle was fed
    node.store                           the StateStore for admin states (cluster.store), kept in Redis
                                         by cluster.admin; await node.flush_admin() writes changes now
    endpoint overlay                     kept in Redis by cluster.overlay (<prefix>endpoints, read at
                                         every (re)connection); await node.flush_overlay() writes it now;
                                         another instance's changes reach `on_overlay(changes)`
    load feedback                        cluster.loads: one instance fetches each endpoint's load per
                                         interval (node.load_turn / node.publish_load, the scheduler's
                                         load gate), every instance is fed the same figures (`on_load`)
    await node.stop()                    releases the locks this instance holds, closes the connection

`feed(endpoint, ProbeResult)` and `on_admin(key, state)` run on the event loop and must be cheap.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import secrets
import socket
from collections.abc import Callable, Sequence

from redis.asyncio import Redis

from gslbd.clock import Clock
from gslbd.cluster.admin import AdminFeed, AdminSync
from gslbd.cluster.cycles import Ledger
from gslbd.cluster.keys import (
    ClusterKeys,
    HealthUpdate,
    decode_health_update,
    encode_health_update,
    health_ttl,
    health_value,
    lock_ttl,
    millis,
    parse_health_value,
)
from gslbd.cluster.link import REDIS_FAILURES, ClientFactory, RedisLink
from gslbd.cluster.loads import LoadFeed, LoadShare
from gslbd.cluster.overlay import OverlayFeed, OverlaySync
from gslbd.cluster.store import RedisStateStore
from gslbd.cluster.url import make_client, parse_target
from gslbd.metrics import CLUSTER_PROBES_SKIPPED, CLUSTER_RESULT_AGE, CLUSTER_RESULTS
from gslbd.model.config import Config, RedisConfig
from gslbd.model.service import Endpoint, EndpointKey
from gslbd.state.status import ProbeResult
from gslbd.state.store import StateStore
from gslbd.types import SyncMode

log = logging.getLogger(__name__)

Feed = Callable[[Endpoint, ProbeResult], None]

DEFAULT_TIMEOUT = 1.0  # seconds to connect to Redis and per command
SEED_BATCH = 500  # endpoints per round trip while seeding
DETAIL = {True: "via redis: up", False: "via redis: down"}

# Delete a lock only if this instance still holds it.
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
# Keep our own lock for another TTL, or take it if it expired since SET NX failed; 0 if someone else has it.
RENEW = (
    "local v = redis.call('get', KEYS[1]) "
    "if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end "
    "if not v then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end "
    "return 0"
)


def default_instance_id() -> str:
    """An id "<host>:<pid>:<random>": the value of the locks this instance takes."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class ClusterNode:
    """See the module docstring. Also the health scheduler's `ProbeGate`."""

    def __init__(
        self,
        config: RedisConfig,
        clock: Clock,
        feed: Feed,
        on_admin: AdminFeed,
        *,
        local_store: StateStore,
        instance_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        client_factory: ClientFactory = make_client,
        on_overlay: OverlayFeed | None = None,
        on_load: LoadFeed | None = None,
    ) -> None:
        self.config = config
        self.keys = ClusterKeys(config.key_prefix)
        self.instance_id = instance_id or default_instance_id()
        self._clock = clock
        self._feed = feed
        self._on_admin = on_admin
        self._ledger = Ledger()
        self._endpoints: dict[EndpointKey, Endpoint] = {}
        self._names: dict[EndpointKey, tuple[str, str, str]] = {}  # zone, lock key, health key
        self._won: set[EndpointKey] = set()
        self._held: set[EndpointKey] = set()
        self.link = RedisLink(
            parse_target(config.url, config.password),
            (self.keys.updates, self.keys.admin_updates, self.keys.endpoints_updates, self.keys.load_updates),
            self._on_message,
            self._on_up,
            timeout=timeout,
            client_factory=client_factory,
        )
        self.admin = AdminSync(self.keys, self.link, local_store, on_admin)
        self.store: RedisStateStore = self.admin.store
        self.overlay = OverlaySync(self.keys, self.link, self.store, self.instance_id, on_overlay)
        self.admin.also_flush = self.overlay.flush
        self.loads = LoadShare(self.keys, self.link, self.instance_id, on_load)

    @property
    def connected(self) -> bool:
        return self.link.connected

    @property
    def lock_mode(self) -> bool:
        return self.config.sync_mode is SyncMode.LOCK

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self, config: Config, endpoints: Sequence[Endpoint]) -> None:
        """The start-up sequence (never raises for Redis trouble: then it warns once and goes local)."""
        self.update(config, endpoints)
        if await self.link.open():
            await self._seed()
            await self.loads.seed()
        self.admin.start()

    def update(self, config: Config, endpoints: Sequence[Endpoint]) -> None:
        """Follow the probed endpoints of a (re)loaded config."""
        zones = {svc.name: svc.zone for svc in config.services}
        wanted = {ep.key: ep for ep in endpoints if ep.check is not None and ep.service in zones}
        for key in [k for k in self._endpoints if k not in wanted]:
            del self._endpoints[key]
            del self._names[key]
            self._held.discard(key)
            with contextlib.suppress(KeyError):
                CLUSTER_RESULT_AGE.remove(*key)
        for key, ep in wanted.items():
            assert ep.check is not None
            zone = zones[ep.service]
            if key not in self._endpoints:
                CLUSTER_RESULT_AGE.labels(*key).set_function(functools.partial(self._age, key))
            self._endpoints[key] = ep
            self._names[key] = (
                zone,
                self.keys.lock(zone, *key),  # a check of several: "<address>#<check>" (keys.py)
                self.keys.health(zone, *key),
            )
            self._ledger.track(key, ep.check.interval)
        self._ledger.retain(set(wanted))

    def update_loads(self, config: Config, endpoints: Sequence[Endpoint]) -> None:
        """Follow the endpoints whose load this instance fetches (app/reconcile.py loaded_endpoints)."""
        self.loads.update(config, endpoints, self.lock_mode)

    async def load_turn(self, endpoint: Endpoint) -> bool:
        """Whether this instance fetches the endpoint's load now (cluster.loads `turn`)."""
        return await self.loads.turn(endpoint)

    async def publish_load(self, endpoint: Endpoint, figure: float) -> None:
        """A good figure fetched here: shared when this instance won the interval."""
        await self.loads.publish(endpoint, figure)

    async def stop(self) -> None:
        """Release the locks held here (another instance takes over at its next cycle, not after the
        lock TTL), stop the admin writer, close the connection."""
        await self.admin.stop()
        await self._release()
        await self.link.close()
        for key in self._endpoints:
            with contextlib.suppress(KeyError):
                CLUSTER_RESULT_AGE.remove(*key)
        self._endpoints.clear()  # a start after a stop follows them afresh
        self._names.clear()

    async def _release(self) -> None:
        client, _ = self.link.current()
        held = [self._names[k][1] for k in self._held if k in self._names]
        self._held.clear()
        if client is None or not held:
            return
        try:
            async with self.link.deadline(), client.pipeline(transaction=False) as pipe:
                for lock in held:
                    pipe.eval(RELEASE, 1, lock, self.instance_id)
                await pipe.execute()
        except REDIS_FAILURES as exc:
            self.link.failed("release", exc)

    # -- the probe gate --------------------------------------------------------------------------

    def delay(self, endpoint: Endpoint, first: bool) -> float | None:
        """Seconds until the endpoint's next shared cycle. None (the scheduler's own quick start) for
        the first cycle of an endpoint nothing is known about yet."""
        key = endpoint.key
        if first and self._ledger.newest(key) is None:
            return None
        return self._ledger.delay(key, self._clock.wall())

    async def acquire(self, endpoint: Endpoint) -> bool:
        """Whether this instance probes the endpoint in this cycle (see the module docstring)."""
        key = endpoint.key
        now = self._clock.wall()
        self._won.discard(key)
        names = self._names.get(key)
        check = endpoint.check
        if names is None or check is None:
            return True
        client, generation = self.link.current()
        if not self.lock_mode or client is None:
            if client is not None:
                self._won.add(key)  # sync_mode none: everyone probes, writes and publishes
            self._ledger.claim(key, now)
            return True
        _, lock, health = names
        ttl = millis(lock_ttl(check.interval))
        try:
            async with self.link.deadline(), client.pipeline(transaction=False) as pipe:
                pipe.set(lock, self.instance_id, nx=True, px=ttl)
                pipe.get(lock)
                pipe.get(health)
                pipe.pttl(health)
                won, holder, value, pttl = await pipe.execute()
            if not won and holder == self.instance_id:
                # Our own lock from the last cycle (a lock outlives an interval shorter than 4 s).
                async with self.link.deadline():
                    won = bool(await client.eval(RENEW, 1, lock, self.instance_id, ttl))
        except REDIS_FAILURES as exc:
            self.link.failed("lock", exc, generation)
            self._ledger.claim(key, now)
            return True
        if won:
            self._won.add(key)
            self._held.add(key)
            self._ledger.claim(key, now)
            return True
        self._held.discard(key)
        alive = parse_health_value(value)
        if alive is None:  # nothing shared for two intervals: probe here, share nothing
            self._ledger.claim(key, now)
            return True
        CLUSTER_PROBES_SKIPPED.inc()
        if self._ledger.claim(key, self._ledger.written_at(key, now, int(pttl))):
            self._deliver(endpoint, alive, "read")
        return False

    async def publish(self, endpoint: Endpoint, result: ProbeResult) -> None:
        """A probe here finished (it is fed here right after): write and publish it when this instance
        shares it."""
        key = endpoint.key
        now = self._clock.wall()
        CLUSTER_RESULTS.labels(source="probe").inc()
        self._ledger.seen(key, now)
        if key not in self._won:
            return
        self._won.discard(key)
        client, generation = self.link.current()
        names = self._names.get(key)
        check = endpoint.check
        if client is None or names is None or check is None:
            return
        zone, _, health = names
        message = encode_health_update(HealthUpdate(zone, key[0], key[1], result.ok))
        self._ledger.published(key, result.ok, now)
        try:
            async with self.link.deadline(), client.pipeline(transaction=False) as pipe:
                pipe.set(health, health_value(result.ok), px=millis(health_ttl(check.interval)))
                pipe.publish(self.keys.updates, message)
                await pipe.execute()
        except REDIS_FAILURES as exc:
            self._ledger.unpublished(key)
            self.link.failed("write", exc, generation)

    # -- results from Redis ----------------------------------------------------------------------

    def _deliver(self, endpoint: Endpoint, alive: bool, source: str) -> None:
        CLUSTER_RESULTS.labels(source=source).inc()
        try:
            self._feed(endpoint, ProbeResult(ok=alive, detail=DETAIL[alive]))
        except Exception:
            log.exception("cluster: feeding a result for %s %s failed", endpoint.service, endpoint.address)

    async def _seed(self) -> None:
        """Set every endpoint's first verdict from its health key (where there is one)."""
        client, generation = self.link.current()
        if client is None:
            return
        keys = list(self._endpoints)
        seeded = 0
        try:
            for begin in range(0, len(keys), SEED_BATCH):
                batch = keys[begin : begin + SEED_BATCH]
                async with self.link.deadline(), client.pipeline(transaction=False) as pipe:
                    for key in batch:
                        health = self._names[key][2]
                        pipe.get(health)
                        pipe.pttl(health)
                    values = await pipe.execute()
                now = self._clock.wall()
                for i, key in enumerate(batch):
                    alive = parse_health_value(values[2 * i])
                    endpoint = self._endpoints.get(key)
                    if alive is None or endpoint is None:
                        continue
                    if self._ledger.claim(key, self._ledger.written_at(key, now, int(values[2 * i + 1]))):
                        self._deliver(endpoint, alive, "seed")
                        seeded += 1
        except REDIS_FAILURES as exc:
            self.link.failed("seed", exc, generation)
            return
        log.info("cluster: %d of %d endpoints started from the health shared in Redis", seeded, len(keys))

    def _on_message(self, channel: str, data: str) -> None:
        if channel == self.keys.updates:
            self._on_health(data)
        elif channel == self.keys.admin_updates:
            self.admin.on_message(data)
        elif channel == self.keys.endpoints_updates:
            self.overlay.on_message(data)
        elif channel == self.keys.load_updates:
            self.loads.on_message(data)

    def _on_health(self, data: str) -> None:
        update = decode_health_update(data)
        if update is None:
            return
        key = (update.fqdn, update.address)
        endpoint = self._endpoints.get(key)
        names = self._names.get(key)
        if endpoint is None or names is None or names[0] != update.zone:
            return
        now = self._clock.wall()
        if self._ledger.is_echo(key, update.alive, now):
            return
        if not self.lock_mode:  # sync_mode none: every instance goes by its own probes
            self._ledger.seen(key, now)
            return
        if self._ledger.claim(key, now):
            self._deliver(endpoint, update.alive, "message")

    def _age(self, key: EndpointKey) -> float:
        newest = self._ledger.newest(key)
        return math.nan if newest is None else max(0.0, self._clock.wall() - newest)

    async def flush_admin(self) -> None:
        """Write the admin changes saved in `store` to Redis now (see cluster.admin)."""
        await self.admin.flush()

    async def flush_overlay(self) -> None:
        """Write the endpoint overlay changes saved in `store` to Redis now (see cluster.overlay)."""
        await self.overlay.flush()

    async def _on_up(self, client: Redis) -> None:
        """After every (re)connection: our publications before it will not come back; admin states."""
        self._ledger.forget_echoes()
        await self.admin.on_up(client)
        await self.overlay.on_up(client)
