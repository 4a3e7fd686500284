"""config.urls is the one parser of `cluster.redis.url`: the reader's located errors, the secret warnings
and the cluster client all read a URL through it, the same on Python 3.11.2 (Debian 12) and later."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from gslbd.config import check_config, check_config_text
from gslbd.config.urls import RedisTarget, parse_redis_url, redact, split_url

DOCUMENTED = "redis+sentinel://10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/0"
ZONE = "version: 1\nzones: [{origin: gslb.example.com., nameservers: [{name: ns1, address: 127.0.0.2}]}]\n"


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


def test_the_documented_sentinel_url_parses_into_its_sentinels_master_and_db() -> None:
    assert parse_redis_url(f" {DOCUMENTED} ") == RedisTarget(
        scheme="redis+sentinel",
        url=DOCUMENTED,
        sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380)),
        master="mymaster",
        db=0,
    )


def test_the_documented_sentinel_url_passes_check_with_its_secret_warning_on_its_line(tmp_path: Path) -> None:
    """`gslbd check` and every reload read this; Python 3.11.2's urlsplit raised "Invalid IPv6 URL"."""
    path = tmp_path / "c.yaml"
    url = DOCUMENTED.replace("://", "://:pw@") + "?sentinel_password=sp"
    path.write_text(ZONE + f"cluster:\n  redis:\n    url: '{url}'\n")
    path.chmod(0o644)
    config, problems = check_config(path)
    assert config is not None and config.cluster is not None
    assert config.cluster.redis.url == url
    assert [str(p) for p in problems] == [
        f"{path}:5: cluster.redis.url: this file holds a secret and is readable by every user (mode 0644); "
        "chmod 600 it or move the secret to a file of its own"
    ]
    path.write_text(ZONE + f"cluster:\n  redis:\n    url: '{DOCUMENTED}'\n")
    assert check_config(path)[1] == []


def test_passwords_come_from_the_userinfo_percent_decoded() -> None:
    target = parse_redis_url("redis://user:p%40ss@127.0.0.1:6379/3")
    assert (target.username, target.password, target.db) == ("user", "p@ss", 3)
    assert parse_redis_url("unix://:pw@/run/redis.sock").password == "pw"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "http://127.0.0.1:6379",
            "unsupported URL scheme 'http' in 'http://127.0.0.1:6379'; valid: redis | "
            "rediss | unix | redis+sentinel",
        ),
        (
            "redis+sentinel://10.0.0.1,[::1:26379/mymaster",
            "invalid sentinel address '[::1:26379'; expected host[:port]",
        ),
        ("redis+sentinel://s1:abc/m", "invalid sentinel address 's1:abc'; expected host[:port]"),
        ("redis+sentinel://s1:70000/m", "invalid sentinel address 's1:70000'; expected host[:port]"),
        ("redis+sentinel://[::1]x/m", "invalid sentinel address '[::1]x'; expected host[:port]"),
        ("redis+sentinel://s1,,s2/m", "invalid sentinel address ''; expected host[:port]"),
        (
            "redis+sentinel://s1:26379/",
            "a sentinel URL needs the master name: redis+sentinel://host:26379/mymaster/0",
        ),
        ("redis+sentinel://s1:26379/m/x", "the path must be /<master name>[/<db>]"),
        (
            "redis+sentinel://s1/m?ssl=true",
            "unsupported option 'ssl'; a sentinel URL takes sentinel_password",
        ),
        ("redis://[::1:6379/0", "Invalid IPv6 URL"),
        ("redis://a,b/0", "only a redis+sentinel:// URL lists several hosts"),
        ("redis:///0", "missing host"),
        ("redis://h:99999/0", "invalid port"),
        ("redis://h/db1", "the path must be a database number, like /0"),
        ("unix://", "a unix:// URL needs a socket path"),
    ],
)
def test_an_unusable_url_is_a_config_error_with_file_line_and_field(url: str, message: str) -> None:
    config, problems = check_config_text(ZONE + f"cluster:\n  redis:\n    url: '{url}'\n", "t.yaml")
    assert config is None
    shown = "" if message.startswith("unsupported URL scheme") else f"{url!r}: "
    assert [str(p) for p in problems] == [f"t.yaml:5: cluster.redis.url: {shown}{message}"]
    with pytest.raises(ValueError, match="^" + "".join("\\" + c if not c.isalnum() else c for c in shown)):
        parse_redis_url(url)


def test_an_error_shows_the_url_without_its_password() -> None:
    _, problems = check_config_text(ZONE + "cluster: {redis: {url: 'redis://u:hunter2@h/x'}}\n", "t.yaml")
    assert [str(p) for p in problems] == [
        "t.yaml:3: cluster.redis.url: 'redis://u:***@h/x': the path must be a database number, like /0"
    ]
    assert redact("redis+sentinel://:pw@s1,[::1]/m") == "redis+sentinel://:***@s1,[::1]/m"
