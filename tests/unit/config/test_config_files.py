"""Loading from files: relative paths, token files, GeoIP and CA files, unreadable configs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gslbd.config import check_config, load_config
from gslbd.errors import ConfigError, Problem

ZONE = """\
zones:
  - origin: gslb.example.com.
    nameservers: [{name: ns1, address: 127.0.0.2}]
"""


def write(tmp_path: Path, text: str, name: str = "gslbd.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_token_file_is_read_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token").write_text("s3cret\n", encoding="utf-8")
    config = load_config(
        write(tmp_path, ZONE + "api: {listen: '127.0.0.1:8080', token_file: secrets/token}\n")
    )
    assert config.api is not None
    assert config.api.token == "s3cret"
    assert config.api.token_file == str(tmp_path / "secrets" / "token")


def test_missing_and_empty_token_files_are_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n", encoding="utf-8")
    missing = write(tmp_path, ZONE + "api: {listen: '127.0.0.1:8080', token_file: nope}\n", "a.yaml")
    empty = write(tmp_path, ZONE + "api: {listen: '127.0.0.1:8080', token_file: empty}\n", "b.yaml")
    assert [str(p) for p in check_config(missing)[1]] == [
        f"{missing}:4: api.token_file: cannot read token file '{tmp_path / 'nope'}': "
        "No such file or directory"
    ]
    assert [str(p) for p in check_config(empty)[1]] == [
        f"{empty}:4: api.token_file: token file '{tmp_path / 'empty'}' is empty"
    ]


def test_geoip_database_and_ca_file_must_exist(tmp_path: Path) -> None:
    (tmp_path / "City.mmdb").write_bytes(b"\x00")
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    config = load_config(
        write(
            tmp_path,
            ZONE
            + "topology: {geoip: {database: City.mmdb}}\n"
            + "checks: {tls: {type: https, ca_file: ca.pem}}\n"
            + "services: [{name: app, check: tls, endpoints: [{address: 192.0.2.1}]}]\n",
        )
    )
    assert config.topology.geoip_database == str(tmp_path / "City.mmdb")
    assert config.checks[0].ca_file == str(tmp_path / "ca.pem")
    bad = write(tmp_path, ZONE + "checks: {tls: {type: https, ca_file: nope.pem}}\n", "bad.yaml")
    assert [str(p) for p in check_config(bad)[1] if p.severity == "error"] == [
        f"{bad}:4: checks.tls.ca_file: CA file '{tmp_path / 'nope.pem'}' is not a file that exists"
    ]


def test_load_config_raises_every_error_and_logs_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = write(tmp_path, "version: 3\ndns: {workers: 0}\n", "bad.yaml")
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    assert caught.value.problems == [
        Problem(str(bad), 1, "version", "unsupported version 3; this gslbd reads version 1"),
        Problem(str(bad), 2, "dns.workers", "must be between 1 and 1024, got 0"),
    ]
    good = write(tmp_path, "dns: {workers: 2}\n", "good.yaml")
    with caplog.at_level(logging.WARNING, logger="gslbd.config"):
        config = load_config(good)
    assert config.dns.workers == 2
    assert caplog.messages == [f"{good}:1: zones: no zones: every query will be answered REFUSED"]


def test_check_config_reports_an_unreadable_file_instead_of_raising(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    config, problems = check_config(missing)
    assert config is None
    assert [str(p) for p in problems] == [
        f"{missing}: cannot read the configuration: No such file or directory"
    ]


def test_empty_file_is_a_valid_config_with_a_warning(tmp_path: Path) -> None:
    config, problems = check_config(write(tmp_path, "# nothing yet\n"))
    assert config is not None
    assert config.zones == ()
    assert [(p.severity, p.message) for p in problems] == [
        ("warning", "no zones: every query will be answered REFUSED")
    ]
