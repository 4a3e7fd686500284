"""`dns.rrl` and `dns.cookies`: the settings that protect an internet-facing server (docs/rrl.md,
docs/cookies.md).

dns:
  rrl:                          # off when absent
    responses_per_second: 20    # per bucket; 0 = not limited
    errors_per_second: 20       # default: responses_per_second
    nxdomains_per_second: 20    # default: responses_per_second
    window: 15s
    slip: 2                     # every 2nd limited response is sent truncated (TC=1); 0 = drop all
    ipv4_prefix_length: 24
    ipv6_prefix_length: 56
    exempt: [10.0.0.0/8]
  cookies:                      # off when absent; {} = a random secret per start
    secret_file: cookie.key     # 32 hex digits (16 bytes), relative to the config's directory
"""

from __future__ import annotations

import binascii
import ipaddress
import stat
from pathlib import Path

from gslbd.config.fields import Invalid, MapReader, duration, integer, is_null, nonempty_string, string
from gslbd.config.loader import Entry, Map, Node
from gslbd.config.urls import parse_redis_url
from gslbd.errors import Problem
from gslbd.model.config import Config, CookieConfig, RrlConfig

COOKIE_SECRET_BYTES = 16
_RATE = integer(0, 1_000_000)


def _network(node: Node) -> str:
    text = string(node).strip()
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError as exc:
        raise Invalid(f"invalid network {text!r}: {exc}") from None


def read_rrl(r: MapReader | None) -> RrlConfig | None:
    """The rate limiter's settings; None when `dns.rrl` is absent."""
    if r is None:
        return None
    r.check_keys(
        (
            "responses_per_second",
            "errors_per_second",
            "nxdomains_per_second",
            "window",
            "slip",
            "ipv4_prefix_length",
            "ipv6_prefix_length",
            "exempt",
        )
    )
    defaults = RrlConfig()
    responses = r.get("responses_per_second", _RATE, defaults.responses_per_second)
    found = r.list_of("exempt", _network)
    return RrlConfig(
        responses_per_second=responses,
        errors_per_second=r.get("errors_per_second", _RATE, responses),
        nxdomains_per_second=r.get("nxdomains_per_second", _RATE, responses),
        window=r.get("window", duration(), defaults.window),
        slip=r.get("slip", integer(0, 10), defaults.slip),
        ipv4_prefix_length=r.get("ipv4_prefix_length", integer(0, 32), defaults.ipv4_prefix_length),
        ipv6_prefix_length=r.get("ipv6_prefix_length", integer(0, 128), defaults.ipv6_prefix_length),
        exempt=tuple(dict.fromkeys(n for n, _, _ in found or ())),
    )


def parse_cookie_secret(text: str) -> bytes:
    """16 bytes written as 32 hex digits (whitespace around them is ignored)."""
    digits = "".join(text.split())
    try:
        secret = binascii.unhexlify(digits)
    except (binascii.Error, ValueError):
        raise ValueError("a cookie secret is 32 hex digits (16 bytes)") from None
    if len(secret) != COOKIE_SECRET_BYTES:
        raise ValueError(f"a cookie secret is 32 hex digits (16 bytes), this one has {len(secret)} bytes")
    return secret


def read_cookies(r: MapReader | None) -> CookieConfig | None:
    """The cookie settings with the secret read from `secret_file`; None when `dns.cookies` is absent."""
    if r is None:
        return None
    r.check_keys(("secret_file",))
    text = r.opt("secret_file", nonempty_string)
    if text is None:
        return CookieConfig()
    path = r.rep.resolve_path(text)
    try:
        secret = parse_cookie_secret(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        r.error("secret_file", f"cannot use cookie secret file {str(path)!r}: {why}")
        return CookieConfig(str(path))
    warn_readable_secret_file(r, "secret_file", path, "cookie secret file")
    return CookieConfig(str(path), secret)


def readable_by_others(path: Path) -> int | None:
    """The file's permission bits when every user may read it (mode & 0o004), else None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return stat.S_IMODE(mode) if mode & stat.S_IROTH else None


def warn_readable_secret_file(r: MapReader, key: str, path: Path, what: str) -> None:
    """A warning at `key` when the secret file at `path` is readable by every user."""
    mode = readable_by_others(path)
    if mode is not None:
        r.warn(key, f"{what} {str(path)!r} is readable by every user (mode {mode:04o}); chmod 600 it")


def _entry(tree: Node | None, dotted: str) -> Entry | None:
    node: Node | None = tree
    entry = None
    for key in dotted.split("."):
        if not isinstance(node, Map):
            return None
        entry = node.get(key)
        if entry is None:
            return None
        node = entry.value
    return entry


def inline_secrets(tree: Node | None, config: Config) -> list[tuple[str, int]]:
    """(dotted path, line) of every secret written in the configuration itself."""
    found = []
    for dotted in ("api.token", "peers.tsig.secret", "cluster.redis.password"):
        entry = _entry(tree, dotted)
        if entry is not None and not is_null(entry.value):
            found.append((dotted, entry.key_line))
    entry = _entry(tree, "cluster.redis.url")
    if entry is not None and config.cluster is not None:
        try:
            target = parse_redis_url(config.cluster.redis.url)
        except ValueError:  # refused, with its line, by the reader (network._redis_url)
            return found
        if target.password or target.sentinel_password:
            found.append(("cluster.redis.url", entry.key_line))
    return found


def secret_warnings(source: str, path: Path, tree: Node | None, config: Config) -> list[Problem]:
    """Warnings for a configuration file (parsed as `tree`) that holds secrets and that every user may
    read."""
    mode = readable_by_others(path)
    if mode is None:
        return []
    return [
        Problem(
            source,
            line,
            where,
            f"this file holds a secret and is readable by every user (mode {mode:04o}); chmod 600 it "
            "or move the secret to a file of its own",
            "warning",
        )
        for where, line in inline_secrets(tree, config)
    ]
