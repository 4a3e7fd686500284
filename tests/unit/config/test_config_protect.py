"""`dns.rrl`, `dns.cookies`, `dns.tcp_backlog`, `dns.threads`: values, defaults, errors with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gslbd.config import check_config, check_config_text
from gslbd.model.config import CookieConfig, RrlConfig

SECRET_HEX = "e5e973e5a6b2a43f48e7dc849e37bfcf"
ZONE = """\
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
"""


def load(text: str, base: Path | None = None) -> tuple[object, list[str]]:
    config, problems = check_config_text(ZONE + text, "c.yaml", base)
    return config, [str(p) for p in problems if p.severity == "error"]


def test_rrl_and_cookies_are_off_when_absent_and_the_backlog_defaults_to_1024() -> None:
    config, errors = load("dns: {listen: ['127.0.0.1:53']}\n")
    assert not errors
    dns = config.dns  # type: ignore[attr-defined]
    assert (dns.rrl, dns.cookies, dns.tcp_backlog) == (None, None, 1024)


def test_dns_threads_defaults_to_one_and_is_read_beside_workers() -> None:
    config, errors = load("dns: {listen: ['127.0.0.1:53']}\n")
    assert not errors and config.dns.threads == 1  # type: ignore[attr-defined]
    config, errors = load("dns: {workers: 2, threads: 64}\n")
    assert not errors
    assert (config.dns.workers, config.dns.threads) == (2, 64)  # type: ignore[attr-defined]


def test_rrl_values_and_defaults() -> None:
    config, errors = load(
        "dns:\n  tcp_backlog: 4096\n  rrl: {responses_per_second: 10, window: 5s, slip: 0,\n"
        "        ipv4_prefix_length: 32, exempt: [10.1.2.3/8, '2001:db8::/32']}\n  cookies: {}\n"
    )
    assert not errors
    dns = config.dns  # type: ignore[attr-defined]
    assert dns.tcp_backlog == 4096
    assert dns.rrl == RrlConfig(10, 10, 10, 5.0, 0, 32, 56, ("10.0.0.0/8", "2001:db8::/32"))
    assert dns.cookies == CookieConfig()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dns:\n  rrl: {slip: 11}\n", "c.yaml:5: dns.rrl.slip: "),
        ("dns:\n  rrl: {ipv6_prefix_length: 129}\n", "c.yaml:5: dns.rrl.ipv6_prefix_length: "),
        (
            "dns:\n  rrl: {exempt: [10.0.0.0/33]}\n",
            "c.yaml:5: dns.rrl.exempt[0]: invalid network '10.0.0.0/33'",
        ),
        ("dns:\n  rrl: {responses: 5}\n", "c.yaml:5: dns.rrl.responses: unknown key 'responses'"),
        ("dns:\n  rrl: {window: -1s}\n", "c.yaml:5: dns.rrl.window: "),
        ("dns:\n  tcp_backlog: 0\n", "c.yaml:5: dns.tcp_backlog: "),
        ("dns:\n  cookies: {secret: abc}\n", "c.yaml:5: dns.cookies.secret: unknown key 'secret'"),
    ],
)
def test_invalid_settings_are_reported_with_file_line_and_field(text: str, expected: str) -> None:
    config, errors = load(text)
    assert config is None
    assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_the_cookie_secret_is_read_from_its_file(tmp_path: Path) -> None:
    (tmp_path / "cookie.key").write_text("e5e973e5a6b2a43f 48e7dc849e37bfcf\n")
    config, errors = load("dns:\n  cookies: {secret_file: cookie.key}\n", tmp_path)
    assert not errors
    cookies = config.dns.cookies  # type: ignore[attr-defined]
    assert cookies.secret == bytes.fromhex("e5e973e5a6b2a43f48e7dc849e37bfcf")
    assert cookies.secret_file == str(tmp_path / "cookie.key")


@pytest.mark.parametrize(
    ("content", "why"),
    [("abcd\n", "this one has 2 bytes"), ("zz" * 16, "32 hex digits"), (None, "No such file")],
)
def test_a_bad_cookie_secret_file_is_an_error(tmp_path: Path, content: str | None, why: str) -> None:
    if content is not None:
        (tmp_path / "cookie.key").write_text(content)
    config, errors = load("dns:\n  cookies: {secret_file: cookie.key}\n", tmp_path)
    assert config is None
    assert len(errors) == 1 and errors[0].startswith("c.yaml:5: dns.cookies.secret_file: cannot use")
    assert why in errors[0]


def test_a_world_readable_token_file_or_cookie_secret_file_is_warned_about(tmp_path: Path) -> None:
    token, secret = tmp_path / "token", tmp_path / "cookie.key"
    token.write_text("s3cret\n")
    secret.write_text(SECRET_HEX)
    text = "dns:\n  cookies: {secret_file: cookie.key}\napi: {listen: '127.0.0.1:8080', token_file: token}\n"
    for path in (token, secret):
        path.chmod(0o644)
    config = write_config(tmp_path, text, 0o600)
    warnings = [str(p) for p in check_config(config)[1]]
    assert warnings == [
        f"{config}:5: dns.cookies.secret_file: cookie secret file '{secret}' is readable by every user "
        "(mode 0644); chmod 600 it",
        f"{config}:6: api.token_file: token file '{token}' is readable by every user "
        "(mode 0644); chmod 600 it",
    ]
    for path in (token, secret):
        path.chmod(0o640)
    assert check_config(config)[1] == []


def test_a_world_readable_config_holding_secrets_is_warned_about(tmp_path: Path) -> None:
    text = (
        "api: {listen: '127.0.0.1:8080', token: s3cret}\n"
        "cluster:\n  redis: {url: 'redis://:pw@127.0.0.1:6379/0'}\n"
    )
    config = write_config(tmp_path, text, 0o644)
    problems = check_config(config)[1]
    assert [(p.line, p.path, p.severity) for p in problems] == [
        (4, "api.token", "warning"),
        (6, "cluster.redis.url", "warning"),
    ]
    assert "readable by every user (mode 0644); chmod 600 it" in problems[0].message
    config.chmod(0o600)
    assert check_config(config)[1] == []
    no_secret = write_config(tmp_path, "api: {listen: '127.0.0.1:8080'}\n", 0o644, "plain.yaml")
    assert check_config(no_secret)[1] == []


def write_config(tmp_path: Path, text: str, mode: int, name: str = "gslbd.yaml") -> Path:
    path = tmp_path / name
    path.write_text(ZONE + text)
    path.chmod(mode)
    return path
