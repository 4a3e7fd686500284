"""`run_as: {user, group}`: read as written; unknown names warn (the serving machine may differ); and
`--listen` overrides of dns.listen (config.overrides)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gslbd.config import check_config_text, load_config_text
from gslbd.config.overrides import parse_listen, set_listen
from gslbd.model.config import ListenAddress, RunAs

BASE = "version: 1\nzones: []\n"


def problems_of(text: str) -> list[str]:
    _, problems = check_config_text(BASE + text, "t.yaml")
    return [f"{p.severity}: {p}" for p in problems]


def test_run_as_is_absent_by_default() -> None:
    assert load_config_text(BASE).run_as is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("run_as: {user: nobody, group: nogroup}", RunAs("nobody", "nogroup")),
        ("run_as: {user: nobody}", RunAs("nobody", None)),
        ("run_as: {user: 65534, group: 65534}", RunAs("65534", "65534")),
        ("run_as: {user: 4242, group: 4242}", RunAs("4242", "4242")),  # ids need no passwd entry
    ],
)
def test_run_as_keeps_names_and_ids_as_written(text: str, expected: RunAs) -> None:
    config, problems = check_config_text(BASE + text + "\n", "t.yaml")
    assert problems == []
    assert config is not None and config.run_as == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("run_as: {}", ["error: t.yaml:3: run_as.user: required key is missing"]),
        ("run_as: gslbd", ["error: t.yaml:3: run_as: expected a mapping, got the string 'gslbd'"]),
        (
            "run_as: {user: nobody, home: /tmp}",
            ["error: t.yaml:3: run_as.home: unknown key 'home'; valid keys: group, user"],
        ),
        (
            "run_as: {user: [a]}",
            ["error: t.yaml:3: run_as.user: expected a user or group name, or a numeric id, got a list"],
        ),
        ("run_as: {user: ''}", ["error: t.yaml:3: run_as.user: must not be empty"]),
        (
            "run_as: {user: 4242}",
            ["error: t.yaml:3: run_as.group: required when the user is a uid without a passwd entry (4242)"],
        ),
        (
            "run_as: {user: no-such-user-here, group: no-such-group-here}",
            [
                "warning: t.yaml:3: run_as.user: no user 'no-such-user-here' on this machine: "
                "gslbd serve will refuse to start here",
                "warning: t.yaml:3: run_as.group: no group 'no-such-group-here' on this machine: gslbd serve "
                "will refuse to start here",
            ],
        ),
    ],
)
def test_run_as_problems_name_line_and_field(text: str, expected: list[str]) -> None:
    assert problems_of(text + "\n") == expected


@pytest.fixture
def listen_override() -> Iterator[None]:
    yield
    set_listen(())


def test_a_listen_override_replaces_dns_listen_of_every_load(listen_override: None) -> None:
    text = BASE + 'dns: {listen: ["127.0.0.1:5353"], workers: 2}\n'
    assert load_config_text(text).dns.listen == (ListenAddress("127.0.0.1", 5353),)
    set_listen((parse_listen("[::1]:53"), parse_listen("127.0.0.1:53"), parse_listen("[::1]:53")))
    config = load_config_text(text)
    assert config.dns.listen == (ListenAddress("::1", 53), ListenAddress("127.0.0.1", 53))
    assert config.dns.workers == 2
    set_listen(())
    assert load_config_text(text).dns.listen == (ListenAddress("127.0.0.1", 5353),)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("127.0.0.1", "missing ':port'"),
        ("::1:53", "write IPv6 addresses in brackets"),
        ("127.0.0.1:65536", "port must be between 0 and 65535"),
        ("example.com:53", "is not an IP address"),
    ],
)
def test_listen_overrides_must_be_ip_and_port(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_listen(text)
