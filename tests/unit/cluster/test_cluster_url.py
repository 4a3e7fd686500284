"""The `cluster.redis.url` schemes: parsed into what the redis-py client needs, passwords kept out of logs."""

from __future__ import annotations

from gslbd.cluster.url import RedisTarget, make_client, parse_target, redact


def test_plain_tls_and_unix_urls_keep_the_url_and_take_the_configured_password() -> None:
    assert parse_target("redis://127.0.0.1:6379/0", "secret") == RedisTarget(
        scheme="redis", url="redis://127.0.0.1:6379/0", password="secret"
    )
    assert parse_target("rediss://h:6380/1?ssl_ca_certs=/ca.pem", None).scheme == "rediss"
    assert parse_target("unix:///run/redis.sock", None).url == "unix:///run/redis.sock"


def test_a_password_in_the_url_wins_over_the_configured_one() -> None:
    target = parse_target("redis://user:p%40ss@127.0.0.1:6379/0", "other")
    assert target.password == "p@ss"
    assert target.username == "user"


def test_sentinel_url_lists_sentinels_master_and_db() -> None:
    target = parse_target("redis+sentinel://:pw@10.0.0.1:26380,10.0.0.2,[::1]:26381/mymaster/3", None)
    assert target.sentinels == (("10.0.0.1", 26380), ("10.0.0.2", 26379), ("::1", 26381))
    assert target.master == "mymaster"
    assert target.db == 3
    assert target.password == "pw"
    assert target.sentinel_password is None


def test_sentinel_url_without_db_uses_db_0_and_may_carry_the_sentinels_password() -> None:
    target = parse_target("redis+sentinel://s1:26379/main?sentinel_password=sp", "master-pw")
    assert (target.master, target.db, target.password, target.sentinel_password) == (
        "main",
        0,
        "master-pw",
        "sp",
    )


def test_passwords_are_redacted_for_logs() -> None:
    assert redact("redis://:secret@h:6379/0") == "redis://:***@h:6379/0"
    assert redact("redis://user:secret@h:6379/0") == "redis://user:***@h:6379/0"
    assert redact("redis://h:6379/0") == "redis://h:6379/0"
    assert parse_target("redis+sentinel://:pw@s1/m", None).display == "redis+sentinel://:***@s1/m"


def test_clients_decode_responses_fail_fast_and_do_not_retry() -> None:
    client = make_client(parse_target("redis://127.0.0.1:1/2", "pw"), 0.5)
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["db"] == 2
    assert kwargs["password"] == "pw"
    assert kwargs["socket_timeout"] is None  # bounded per operation by cluster.link
    assert kwargs["socket_connect_timeout"] == 0.5
    assert client.get_encoder().decode_responses is True
    assert client.get_retry()._retries == 0  # type: ignore[union-attr]


def test_sentinel_clients_ask_the_sentinels_for_the_master() -> None:
    client = make_client(parse_target("redis+sentinel://127.0.0.1:1/mymaster/4", "pw"), 0.5)
    pool = client.connection_pool
    assert type(pool).__name__ == "SentinelConnectionPool"
    assert pool.service_name == "mymaster"  # type: ignore[attr-defined]
    assert pool.connection_kwargs["db"] == 4
