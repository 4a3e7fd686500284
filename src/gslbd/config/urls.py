"""Splitting URLs whose network location lists several hosts (Sentinel), which urlsplit may refuse.

Python 3.11.2's `urllib.parse.urlsplit` (Debian 12's python3) rejects a netloc with text before a bracket,
such as `10.0.0.1:26379,[::1]:26380`, with "Invalid IPv6 URL"; 3.11.4 and later accept it. `split_url`
cuts the URL into the same five parts without that check, so every Python 3.11 reads the same URLs.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def split_url(url: str) -> SplitResult:
    """`url` as (scheme, netloc, path, query, fragment). A netloc that lists several hosts (commas) is
    taken as written, its hosts to be checked one by one by the caller; any other URL is urlsplit's, with
    its checks (ValueError for "redis://[::1:6379"). `hostname`, `port`, `username` and `password` of the
    result work as urlsplit's do."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme or not all(c.isalnum() or c in "+-." for c in scheme):
        return urlsplit(url)
    rest, _, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    cut = rest.find("/")
    netloc, path = (rest, "") if cut < 0 else (rest[:cut], rest[cut:])
    if "," not in netloc:
        return urlsplit(url)
    return SplitResult(scheme.lower(), netloc, path, query, fragment)
