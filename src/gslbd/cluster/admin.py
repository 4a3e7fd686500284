"""Admin states through Redis for one instance (part of cluster mode; see cluster.node).

    sync = AdminSync(keys, link, local_store, on_admin)
    sync.store                 the RedisStateStore the App uses (cluster.store)
    await sync.on_up(client)   after every (re)connection: write the changes made while Redis was away
                               (HSET + PUBLISH), offer the states known here for endpoints Redis has none
                               for (HSETNX: Redis's own win), then take Redis's (HGETALL <prefix>admin)
    await sync.flush()         write the changes saved here now (App.set_admin awaits it)
    sync.start() / stop()      a writer task that flushes whatever is saved in the store
    sync.on_message(data)      a change made at another instance: applied through `on_admin`

Our own publications come back on the subscription; they are counted when sent and ignored once each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gslbd.cluster.keys import (
    AdminUpdate,
    ClusterKeys,
    admin_field,
    decode_admin_update,
    encode_admin_update,
    parse_admin_hash,
)
from gslbd.cluster.link import REDIS_FAILURES, RedisLink
from gslbd.cluster.store import RedisStateStore
from gslbd.model.service import EndpointKey
from gslbd.state.store import StateStore
from gslbd.types import AdminState

log = logging.getLogger(__name__)

AdminFeed = Callable[[EndpointKey, AdminState], None]


class AdminSync:
    """See the module docstring."""

    def __init__(
        self, keys: ClusterKeys, link: RedisLink, local_store: StateStore, on_admin: AdminFeed
    ) -> None:
        self.keys = keys
        self.link = link
        self._on_admin = on_admin
        self._echo: Counter[tuple[EndpointKey, AdminState]] = Counter()
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._writer: asyncio.Task[None] | None = None
        self.store = RedisStateStore(local_store, self._wake.set)
        # What else the writer flushes when the store changed (cluster/overlay.py's endpoint overlay).
        self.also_flush: Callable[[], Awaitable[None]] | None = None

    def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="redis admin writer")

    async def stop(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer

    async def on_up(self, client: Redis) -> None:
        _, generation = self.link.current()
        async with self._lock:
            self._echo.clear()
            pending = self.store.pending()
            known = self.store.load_admin()
            try:
                async with self.link.deadline(), client.pipeline(transaction=False) as pipe:
                    self._queue(pipe, pending)
                    for key, state in known.items():
                        if key not in pending:
                            pipe.hsetnx(self.keys.admin, admin_field(key), state.value)
                    pipe.hgetall(self.keys.admin)
                    results = await pipe.execute()
            except REDIS_FAILURES as exc:
                self._unqueue(pending)
                self.link.failed("admin", exc, generation)
                return
            self.store.flushed(pending)
            changed = self.store.merge_remote(parse_admin_hash(results[-1]))
        for key, state in changed.items():
            self._changed(key, state)

    async def flush(self) -> None:
        """Write the admin changes saved here to Redis now (HSET + PUBLISH). With Redis down they stay
        queued for the reconnect; this never raises for Redis trouble."""
        async with self._lock:
            client, generation = self.link.current()
            pending = self.store.pending()
            if client is None or not pending:
                return
            try:
                async with self.link.deadline(), client.pipeline(transaction=False) as pipe:
                    self._queue(pipe, pending)
                    await pipe.execute()
            except REDIS_FAILURES as exc:
                self._unqueue(pending)
                self.link.failed("admin", exc, generation)
                return
            self.store.flushed(pending)

    def on_message(self, data: str) -> None:
        update = decode_admin_update(data)
        if update is None:
            return
        echo = (update.key, update.state)
        if self._echo[echo] > 0:
            self._echo[echo] -= 1
            return
        if self.store.apply_remote(update.key, update.state):
            self._changed(update.key, update.state)

    def _queue(self, pipe: Pipeline, changes: dict[EndpointKey, AdminState]) -> None:
        for key, state in changes.items():
            pipe.hset(self.keys.admin, admin_field(key), state.value)
            update = AdminUpdate(key[0], key[1], state)
            pipe.publish(self.keys.admin_updates, encode_admin_update(update))
            self._echo[(key, state)] += 1

    def _unqueue(self, changes: dict[EndpointKey, AdminState]) -> None:
        for key, state in changes.items():
            self._echo[(key, state)] -= 1
        self._echo = +self._echo  # drop counts at or below zero

    async def _write(self) -> None:
        """Flush every change saved in the store as soon as it is made."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.flush()
            if self.also_flush is not None:
                await self.also_flush()

    def _changed(self, key: EndpointKey, state: AdminState) -> None:
        try:
            self._on_admin(key, state)
        except Exception:
            log.exception("cluster: applying the admin state of %s %s failed", key[0], key[1])
