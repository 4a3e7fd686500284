"""Where Redis is: the `cluster.redis.url` schemes (parsed by gslbd.config.urls), and the redis-py client
that talks to it.

The password comes from the URL, else from `cluster.redis.password`; with Sentinel it is the master's
password (`sentinel_password` is the sentinels' own, when they have one). Clients fail fast (no retries
inside redis-py, `timeout` seconds to connect; cluster.link bounds every command): cluster.link decides
when to try again.
"""

from __future__ import annotations

from dataclasses import replace

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff

from gslbd.config.urls import RedisTarget, parse_redis_url, redact

__all__ = ["RedisTarget", "make_client", "parse_target", "redact"]


def parse_target(url: str, password: str | None = None) -> RedisTarget:
    """Parse a URL the config accepted (config.urls.parse_redis_url, the one parser), with `password`
    (`cluster.redis.password`) when the URL names none. ValueError for what cannot be used."""
    target = parse_redis_url(url)
    return target if target.password or not password else replace(target, password=password)


def make_client(target: RedisTarget, timeout: float) -> Redis:
    """A client for the target: responses decoded to str, `timeout` seconds to connect, no retries,
    and no socket timeout of redis-py's own: the caller bounds each operation with asyncio.timeout
    (redis-py would wrap every write in asyncio.wait_for, which on Python 3.11 can swallow a
    cancellation). Connections are made on first use (nothing is contacted here)."""
    common = {
        "decode_responses": True,
        "socket_timeout": None,  # bounded by the caller (cluster.link.RedisLink.deadline)
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
    }
    if target.scheme != "redis+sentinel":
        extra = {"password": target.password} if target.password else {}
        return Redis.from_url(target.url, **common, **extra)  # type: ignore[arg-type]
    sentinel_kwargs: dict[str, object] = {
        "socket_timeout": None,
        "socket_connect_timeout": timeout,
        "retry": Retry(NoBackoff(), 0),
    }
    if target.sentinel_password:
        sentinel_kwargs["password"] = target.sentinel_password
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8.2
    client: Redis = sentinel.master_for(
        target.master,
        redis_class=Redis,
        db=target.db,
        password=target.password,
        username=target.username,
        decode_responses=True,
        socket_timeout=None,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )
    return client
