"""The `log` section: format, level and the dnstap query log."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gslbd.config import check_config, check_config_text, load_config_text
from gslbd.model.config import DnstapConfig, LogConfig
from gslbd.types import LogFormat, LogLevel


def test_log_defaults_to_text_at_info_without_dnstap() -> None:
    assert load_config_text("version: 1\nzones: []\n").log == LogConfig(LogFormat.TEXT, LogLevel.INFO, None)


def test_log_json_debug_and_a_dnstap_socket_relative_to_the_config(tmp_path: Path) -> None:
    path = tmp_path / "gslbd.yaml"
    path.write_text(
        "version: 1\nzones: []\nlog:\n  format: json\n  level: debug\n"
        "  dnstap: {socket: dnstap.sock, responses: false}\n"
    )
    config, problems = check_config(path)
    assert problems == []
    assert config is not None
    assert config.log == LogConfig(
        LogFormat.JSON, LogLevel.DEBUG, DnstapConfig(str(tmp_path / "dnstap.sock"), True, False)
    )


@pytest.mark.parametrize(
    ("section", "errors"),
    [
        (
            "log: {format: xml}",
            ["t.yaml:3: log.format: unknown log format 'xml'; valid: text | json"],
        ),
        (
            "log: {level: verbose, colour: true}",
            [
                "t.yaml:3: log.colour: unknown key 'colour'; valid keys: dnstap, format, level",
                "t.yaml:3: log.level: unknown log level 'verbose'; valid: debug | info | warning | error",
            ],
        ),
        ("log: {dnstap: {queries: true}}", ["t.yaml:3: log.dnstap.socket: required key is missing"]),
        (
            "log: {dnstap: {socket: /tmp/x.sock, queries: yes-please}}",
            ["t.yaml:3: log.dnstap.queries: expected true or false, got the string 'yes-please'"],
        ),
        (
            "log: {dnstap: {socket: /tmp/" + "s" * 110 + "}}",
            [
                f"t.yaml:3: log.dnstap.socket: '/tmp/{'s' * 110}' is longer than 107 bytes, "
                "the limit for a unix socket"
            ],
        ),
    ],
)
def test_log_errors_name_line_field_and_reason(section: str, errors: list[str]) -> None:
    config, problems = check_config_text(f"version: 1\nzones: []\n{section}\n", "t.yaml")
    assert config is None
    assert sorted(str(p) for p in problems if p.severity == "error") == sorted(errors)


def test_dnstap_socket_that_is_a_file_is_an_error_a_missing_directory_a_warning(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    _, problems = check_config_text(
        f"version: 1\nzones: []\nlog: {{dnstap: {{socket: {tmp_path}/file}}}}\n", "t"
    )
    assert [str(p) for p in problems] == [
        f"t:3: log.dnstap.socket: '{tmp_path}/file' exists and is not a unix socket"
    ]
    config, problems = check_config_text(
        f"version: 1\nzones: []\nlog: {{dnstap: {{socket: {tmp_path}/no/d.sock}}}}\n", "t"
    )
    assert config is not None
    assert [(p.severity, p.message) for p in problems] == [
        ("warning", f"the directory of '{tmp_path}/no/d.sock' does not exist (yet); dnstap waits for it")
    ]


def test_dnstap_socket_that_exists_is_accepted_and_logging_nothing_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "d.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        config, problems = check_config_text(
            f"version: 1\nzones: []\nlog:\n  dnstap: {{socket: {path}, queries: false, responses: false}}\n",
            "t",
        )
    assert config is not None and config.log.dnstap == DnstapConfig(str(path), False, False)
    assert [(p.severity, str(p)) for p in problems] == [
        (
            "warning",
            "t:4: log.dnstap.queries: queries and responses are both false: the dnstap log stays empty",
        )
    ]


def test_dnstap_file_relative_to_the_config_instead_of_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "gslbd.yaml"
    path.write_text("version: 1\nzones: []\nlog:\n  dnstap: {file: queries.dnstap, responses: false}\n")
    config, problems = check_config(path)
    assert problems == []
    assert config is not None
    assert config.log.dnstap == DnstapConfig(None, True, False, file=str(tmp_path / "queries.dnstap"))
    assert config.log.dnstap.path == str(tmp_path / "queries.dnstap")


def test_dnstap_file_with_a_socket_in_a_missing_directory_or_a_directory_is_an_error(tmp_path: Path) -> None:
    cases = [
        (f"{{file: {tmp_path}/q, socket: {tmp_path}/s}}", "log.dnstap.file: give socket or file, not both"),
        (f"{{file: {tmp_path}/no/q}}", f"log.dnstap.file: the directory of '{tmp_path}/no/q' does not exist"),
        (f"{{file: {tmp_path}}}", f"log.dnstap.file: '{tmp_path}' exists and is not a regular file"),
    ]
    for section, error in cases:
        config, problems = check_config_text(f"version: 1\nzones: []\nlog: {{dnstap: {section}}}\n", "t")
        assert config is None
        assert [str(p) for p in problems] == [f"t:3: {error}"]
