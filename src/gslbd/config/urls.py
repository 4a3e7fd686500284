"""The one parser of `cluster.redis.url`: the config reader checks a URL with it (a located error for what
it refuses), the secret warnings read the URL's passwords with it, and cluster.url connects to what it
returns.

    redis://[[user]:password@]host[:6379][/db][?option=value...]       plain TCP
    rediss://[[user]:password@]host[:6379][/db][?ssl_ca_certs=/path...] TLS (redis-py's ssl_* options)
    unix://[[user]:password@]/path/to/redis.sock[?db=0]                 a Unix socket
    redis+sentinel://[[user]:password@]host[:26379][,host[:26379]...]/master[/db][?sentinel_password=...]

Python 3.11.2's `urllib.parse.urlsplit` (Debian 12's python3) rejects a netloc with text before a bracket,
such as `10.0.0.1:26379,[::1]:26380`, with "Invalid IPv6 URL"; 3.11.4 and later accept it. `split_url`
cuts the URL into the same five parts without that check, so every Python 3.11 reads the same URLs.
Nothing here imports redis-py (the config layer must not need it).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

SCHEMES = ("redis", "rediss", "unix", "redis+sentinel")
SENTINEL_PORT = 26379
SENTINEL_OPTIONS = ("sentinel_password",)


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """A parsed `cluster.redis.url` (with the configured password applied by cluster.url.parse_target)."""

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


def split_url(url: str) -> SplitResult:
    """`url` as (scheme, netloc, path, query, fragment). A sentinel URL's netloc, and any that lists
    several hosts (commas), is taken as written, its hosts to be checked one by one by the caller; any
    other URL is urlsplit's, with its checks (ValueError for "redis://[::1:6379"). `hostname`, `port`,
    `username` and `password` of the result work as urlsplit's do."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme or not all(c.isalnum() or c in "+-." for c in scheme):
        return urlsplit(url)
    rest, _, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    cut = rest.find("/")
    netloc, path = (rest, "") if cut < 0 else (rest[:cut], rest[cut:])
    if "," not in netloc and scheme.lower() != "redis+sentinel":
        return urlsplit(url)
    return SplitResult(scheme.lower(), netloc, path, query, fragment)


def redact(url: str) -> str:
    """`url` with any password replaced by ***."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, cut, tail = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{hosts}{cut}{tail}"


def parse_redis_url(url: str) -> RedisTarget:
    """Parse `url` (surrounding whitespace ignored). ValueError, naming the URL without its password and
    what is wrong, for anything gslbd cannot connect to."""
    text = url.strip()
    shown = repr(redact(text))
    try:
        parts = split_url(text)
    except ValueError as exc:  # urlsplit's own checks, e.g. an unclosed bracket
        raise ValueError(f"{shown}: {exc}") from None
    scheme = parts.scheme
    if scheme not in SCHEMES:
        raise ValueError(f"unsupported URL scheme {scheme!r} in {shown}; valid: {' | '.join(SCHEMES)}")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    user, _, secret = userinfo.partition(":")
    password = unquote(secret) if secret else None
    username = unquote(user) if user else None
    if scheme == "unix":
        if not parts.path:
            raise ValueError(f"{shown}: a unix:// URL needs a socket path")
        return RedisTarget(scheme, text, password, username)
    segments = [s for s in parts.path.split("/") if s]
    if scheme == "redis+sentinel":
        sentinels = tuple(_sentinel(shown, h) for h in hosts.split(","))
        if not segments:
            raise ValueError(
                f"{shown}: a sentinel URL needs the master name: redis+sentinel://host:26379/mymaster/0"
            )
        if len(segments) > 2 or (len(segments) == 2 and not segments[1].isdigit()):
            raise ValueError(f"{shown}: the path must be /<master name>[/<db>]")
        options = dict(parse_qsl(parts.query))
        for name in options:
            if name not in SENTINEL_OPTIONS:
                raise ValueError(
                    f"{shown}: unsupported option {name!r}; a sentinel URL takes sentinel_password"
                )
        return RedisTarget(
            scheme,
            text,
            password,
            username,
            sentinels=sentinels,
            master=unquote(segments[0]),
            db=int(segments[1]) if len(segments) == 2 else 0,
            sentinel_password=options.get("sentinel_password") or None,
        )
    if "," in hosts:
        raise ValueError(f"{shown}: only a redis+sentinel:// URL lists several hosts")
    if not parts.hostname:
        raise ValueError(f"{shown}: missing host")
    try:
        _ = parts.port
    except ValueError:
        raise ValueError(f"{shown}: invalid port") from None
    if len(segments) > 1 or (segments and not segments[0].isdigit()):
        raise ValueError(f"{shown}: the path must be a database number, like /0")
    return RedisTarget(scheme, text, password, username, db=int(segments[0]) if segments else 0)


def _sentinel(shown: str, text: str) -> tuple[str, int]:
    """One sentinel's host[:port] ([v6]:port for an IPv6 address)."""
    if text.startswith("["):
        host, closed, rest = text[1:].partition("]")
        colon, port = rest[:1], rest[1:]
        bad = not closed or (rest != "" and colon != ":")
    else:
        host, colon, port = text.partition(":")
        bad = False
    if bad or not host or (colon and not (port.isdigit() and 0 < int(port) < 65536)):
        raise ValueError(f"{shown}: invalid sentinel address {text!r}; expected host[:port]")
    return host, int(port) if colon else SENTINEL_PORT
