"""Where Redis is: the `cluster.redis.url` schemes, and the redis-py client that talks to it.

    redis://[[user]:password@]host[:6379][/db][?option=value...]       plain TCP
    rediss://[[user]:password@]host[:6379][/db][?ssl_ca_certs=/path...] TLS (redis-py's ssl_* options)
    unix://[[user]:password@]/path/to/redis.sock[?db=0]                 a Unix socket
    redis+sentinel://[[user]:password@]host[:26379][,host[:26379]...]/master[/db][?sentinel_password=...]

The password comes from the URL, else from `cluster.redis.password`; with Sentinel it is the master's
password (`sentinel_password` is the sentinels' own, when they have one). Clients fail fast (no retries
inside redis-py, `timeout` seconds to connect; cluster.link bounds every command): cluster.link decides
when to try again.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff

from gslbd.config.urls import split_url

SENTINEL_PORT = 26379
SENTINEL_OPTIONS = ("sentinel_password",)


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """A parsed `cluster.redis.url` (with the configured password applied)."""

    scheme: str
    url: str
    password: str | None = None
    username: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str = ""
    db: int = 0
    sentinel_password: str | None = None

    @property
    def display(self) -> str:
        """The URL without its password, for logs."""
        return redact(self.url)


def redact(url: str) -> str:
    """`url` with any password replaced by ***."""
    parts = split_url(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hosts}"))


def parse_target(url: str, password: str | None = None) -> RedisTarget:
    """Parse a URL the config accepted. ValueError for what cannot be used."""
    parts = split_url(url.strip())
    scheme = parts.scheme
    if scheme in ("redis", "rediss", "unix"):
        return RedisTarget(
            scheme=scheme,
            url=url.strip(),
            password=unquote(parts.password) if parts.password else password,
            username=unquote(parts.username) if parts.username else None,
        )
    if scheme != "redis+sentinel":
        raise ValueError(f"unsupported Redis URL scheme {scheme!r}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    user, _, secret = userinfo.partition(":")
    sentinels = tuple(_hostport(h) for h in hosts.split(",") if h)
    if not sentinels:
        raise ValueError(f"{redact(url)}: no sentinel host")
    segments = [s for s in parts.path.split("/") if s]
    if not segments or len(segments) > 2 or (len(segments) == 2 and not segments[1].isdigit()):
        raise ValueError(f"{redact(url)}: the path must be /<master name>[/<db>]")
    options = dict(parse_qsl(parts.query))
    unknown = sorted(set(options) - set(SENTINEL_OPTIONS))
    if unknown:
        raise ValueError(
            f"{redact(url)}: unsupported option {unknown[0]!r}; valid: {', '.join(SENTINEL_OPTIONS)}"
        )
    return RedisTarget(
        scheme=scheme,
        url=url.strip(),
        password=unquote(secret) if secret else password,
        username=unquote(user) if user else None,
        sentinels=sentinels,
        master=unquote(segments[0]),
        db=int(segments[1]) if len(segments) == 2 else 0,
        sentinel_password=options.get("sentinel_password") or None,
    )


def _hostport(text: str) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.partition(":")
    if not host:
        raise ValueError(f"sentinel address {text!r} has no host")
    if port and not port.isdigit():
        raise ValueError(f"sentinel address {text!r} has an invalid port")
    return host, int(port) if port else SENTINEL_PORT


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
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
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
