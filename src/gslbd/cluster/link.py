"""The connection to Redis, kept alive: connect, subscribe, notice losses, reconnect with backoff.

    open()     one bounded attempt (connect, PING, SUBSCRIBE, then `on_up`), then a keeper task
               that listens to the subscription and reconnects after any loss
    current()  (client, generation) while connected, (None, generation) while not: callers skip
               Redis entirely while it is down instead of waiting for a timeout per endpoint
    failed()   an operation failed: counted in gslbd_redis_errors_total{operation}; the first failure
               of an outage logs ONE warning and sets gslbd_redis_connected to 0
    close()

After a loss the keeper drops every pooled connection (with Sentinel the next one asks the sentinels
where the master is now), retries after 0.1 s, 0.2 s, ... up to 2 s, and on success subscribes again,
calls `on_up` (admin states are exchanged there) and logs that Redis is back. Every operation is
bounded by `deadline()` (the timeout, 1 s by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gslbd.cluster.url import RedisTarget, make_client
from gslbd.metrics import REDIS_CONNECTED, REDIS_ERRORS

log = logging.getLogger(__name__)

MIN_BACKOFF = 0.1
MAX_BACKOFF = 2.0
LISTEN_POLL = 0.25  # seconds a listen waits before it looks at the link's state again

ClientFactory = Callable[[RedisTarget, float], Redis]
OnMessage = Callable[[str, str], None]
OnUp = Callable[[Redis], Awaitable[None]]

# Errors that mean "Redis did not do it": the server is down, slow, or refused the command.
REDIS_FAILURES = (RedisError, OSError)


_CONNECT_ERRNO = re.compile(r"^Error (\d+) connecting to ")


def describe(exc: BaseException) -> str:
    """A short reason: the socket error underneath ("connection refused"), else the error's text."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and (seen.errno or seen.strerror):
            text = os.strerror(seen.errno) if seen.errno else str(seen.strerror)
            return text[0].lower() + text[1:]
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, TimeoutError | RedisTimeoutError):
        return "timed out"
    found = _CONNECT_ERRNO.search(str(exc))  # redis-py's "Error 111 connecting to host:port. ..."
    if found:
        text = os.strerror(int(found.group(1)))
        return text[0].lower() + text[1:]
    text = str(exc).strip().rstrip(".")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class RedisLink:
    """One Redis client with one subscription to `channels`. Messages go to `on_message(channel, data)`
    on the event loop; `on_up(client)` runs after every (re)connection, before the link counts as up."""

    def __init__(
        self,
        target: RedisTarget,
        channels: tuple[str, ...],
        on_message: OnMessage,
        on_up: OnUp,
        *,
        timeout: float = 1.0,
        client_factory: ClientFactory = make_client,
    ) -> None:
        self.target = target
        self._channels = channels
        self._on_message = on_message
        self._on_up = on_up
        self._timeout = timeout
        self._factory = client_factory
        self._client: Redis | None = None
        self._pubsub: PubSub | None = None
        self._connected = False
        self._generation = 0
        self._warned = False
        self._task: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._connected

    def deadline(self) -> asyncio.Timeout:
        """The bound of one Redis operation (`async with link.deadline(): ...` raises TimeoutError).

        Clients are made without redis-py's socket timeout: with one, redis-py sends every command
        through asyncio.wait_for, which on Python 3.11 can swallow a cancellation (and always costs
        a loop turn before the bytes leave)."""
        return asyncio.timeout(self._timeout)

    def current(self) -> tuple[Redis | None, int]:
        """The client while connected (else None) and the connection's generation."""
        return (self._client if self._connected else None), self._generation

    async def open(self) -> bool:
        """Try once to connect (bounded by the timeout), then keep the link alive in the background.
        True when connected now; False after one warning (local mode until Redis is reachable)."""
        connected = await self._connect()
        if self._task is None:
            self._task = asyncio.create_task(self._keep(), name="redis link")
        return connected

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._connected = False
        REDIS_CONNECTED.set(0)
        await self._drop_pubsub()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(*REDIS_FAILURES):
                async with self.deadline():
                    await client.aclose(close_connection_pool=True)

    def failed(self, operation: str, exc: BaseException, generation: int | None = None) -> None:
        """An operation failed. The first failure of a connection marks the link down (one warning)
        and wakes the keeper; failures of an older connection are only counted."""
        REDIS_ERRORS.labels(operation=operation).inc()
        if not self._connected or (generation is not None and generation != self._generation):
            return
        self._connected = False
        REDIS_CONNECTED.set(0)
        self._warn(f"lost Redis at {self.target.display} ({operation}: {describe(exc)})")

    def _warn(self, what: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("cluster: %s; probing locally and reconnecting in the background", what)

    async def _connect(self) -> bool:
        try:
            if self._client is None:
                self._client = self._factory(self.target, self._timeout)
            client = self._client
            async with self.deadline():
                await client.ping()
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            self._pubsub = pubsub
            async with self.deadline():
                await pubsub.subscribe(*self._channels)
            self._generation += 1
            self._connected = True
            REDIS_CONNECTED.set(1)
            if self._warned:
                self._warned = False
                log.info("cluster: Redis at %s is reachable again; sharing health", self.target.display)
            else:
                log.info("cluster: connected to Redis at %s", self.target.display)
            await self._on_up(client)
        except REDIS_FAILURES as exc:
            REDIS_ERRORS.labels(operation="connect").inc()
            self._connected = False
            REDIS_CONNECTED.set(0)
            await self._drop_pubsub()
            self._warn(f"Redis at {self.target.display} is unreachable ({describe(exc)})")
            return False
        if not self._connected:  # on_up hit an error and reported it
            await self._drop_pubsub()
            return False
        return True

    async def _keep(self) -> None:
        backoff = MIN_BACKOFF
        while True:
            if not self._connected:
                await self._reset()
                if not await self._connect():
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF)
                    continue
                backoff = MIN_BACKOFF
            await self._listen()

    async def _listen(self) -> None:
        pubsub = self._pubsub
        generation = self._generation
        while self._connected and pubsub is not None:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=LISTEN_POLL)
            except REDIS_FAILURES as exc:
                self.failed("subscribe", exc, generation)
                return
            if message is None or message.get("type") != "message":
                continue
            try:
                self._on_message(str(message["channel"]), str(message["data"]))
            except Exception:
                log.exception("cluster: a message on %s could not be handled", message.get("channel"))

    async def _reset(self) -> None:
        """Drop the subscription and every pooled connection (they belong to the lost server)."""
        await self._drop_pubsub()
        if self._client is not None:
            with contextlib.suppress(*REDIS_FAILURES):
                async with self.deadline():
                    await self._client.connection_pool.disconnect()

    async def _drop_pubsub(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(*REDIS_FAILURES):
                async with self.deadline():
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8.2
