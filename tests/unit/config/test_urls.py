"""split_url reads Sentinel URLs that Python 3.11.2's urlsplit refuses, and splits others as urlsplit does."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from gslbd.config.urls import split_url


def test_sentinel_netloc_with_a_bracketed_host_after_others_is_kept_whole() -> None:
    parts = split_url(
        "redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/0?sentinel_password=x"
    )
    assert parts.scheme == "redis+sentinel"
    assert parts.netloc == ":pw@10.0.0.1:26379,10.0.0.2,[::1]:26380"
    assert parts.path == "/mymaster/0"
    assert parts.query == "sentinel_password=x"
    assert parts.password == "pw"


@pytest.mark.parametrize(
    "url",
    [
        "redis://user:secret@127.0.0.1:6379/2",
        "rediss://[::1]:6380/0?ssl_ca_certs=/etc/ca.pem",
        "unix:///run/redis/redis.sock?db=1",
        "unix://:pw@/run/redis.sock",
        "redis://host",
        "REDIS://Host:1/0#frag",
        "no-scheme-here",
    ],
)
def test_other_urls_split_exactly_as_urlsplit_splits_them(url: str) -> None:
    assert split_url(url) == urlsplit(url)
    assert (split_url(url).hostname, split_url(url).port) == (urlsplit(url).hostname, urlsplit(url).port)


def test_a_single_host_keeps_urlsplits_checks() -> None:
    with pytest.raises(ValueError, match="Invalid IPv6 URL"):
        split_url("redis://[::1:6379/0")


def test_a_sentinel_host_with_an_unclosed_bracket_is_a_config_error() -> None:
    from gslbd.config import check_config_text

    url = "redis+sentinel://10.0.0.1,[::1:26379/mymaster"
    _, problems = check_config_text(
        f"version: 1\nzones: []\ncluster: {{redis: {{url: '{url}'}}}}\n", "t.yaml"
    )
    assert [str(p) for p in problems if p.severity == "error"] == [
        f"t.yaml:3: cluster.redis.url: {url!r}: invalid sentinel address '[::1:26379'; expected host[:port]"
    ]
