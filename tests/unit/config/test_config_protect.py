"""`dns.rrl`, `dns.cookies` and `dns.tcp_backlog`: values, defaults and errors with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from gslbd.config import check_config_text
from gslbd.model.config import CookieConfig, RrlConfig

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
