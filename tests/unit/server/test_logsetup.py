"""JSON log lines: one object per line with time, level, logger, message and the call site's fields."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gslbd.cli.serve import effective_logging
from gslbd.config import load_config_text
from gslbd.server.logsetup import JsonFormatter, active_format, setup_logging
from gslbd.types import LogFormat


@pytest.fixture
def stderr() -> Iterator[io.StringIO]:
    try:
        yield io.StringIO()
    finally:
        setup_logging("warning", "text")


def test_json_line_has_time_level_logger_message_and_the_extra_fields(stderr: io.StringIO) -> None:
    setup_logging("info", "json", stream=stderr)
    log = logging.getLogger("gslbd.app.core")
    log.info("%s %s is %s", "app", "192.0.2.10", "down", extra={"event": "verdict", "service": "app"})
    log.debug("not shown at info")
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record.pop("time"))
    assert record == {
        "level": "info",
        "logger": "gslbd.app.core",
        "message": "app 192.0.2.10 is down",
        "event": "verdict",
        "service": "app",
    }
    assert active_format() is LogFormat.JSON


def test_json_keeps_one_line_for_tracebacks_and_strings_what_json_cannot_hold(stderr: io.StringIO) -> None:
    setup_logging("debug", LogFormat.JSON, worker=2, stream=stderr)
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        logging.getLogger("x").exception("failed", extra={"path": Path("/etc/gslbd.yaml"), "time": "forged"})
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["worker"] == 2
    assert record["path"] == "/etc/gslbd.yaml"
    assert record["time"] != "forged"  # a field never overrides the four fixed keys
    assert record["level"] == "error"
    assert record["exception"].startswith("Traceback") and "ValueError: bad\nthing" in record["exception"]


def test_text_format_is_unchanged_and_names_the_worker(stderr: io.StringIO) -> None:
    setup_logging("warning", "text", worker=1, stream=stderr)
    logging.getLogger("gslbd.server").warning("hello", extra={"event": "x"})
    line = stderr.getvalue().strip()
    assert re.fullmatch(r"\S+ \S+ gslbd\[worker-1\] WARNING gslbd.server: hello", line)
    assert active_format() is LogFormat.TEXT


def test_formatter_without_fields_adds_none() -> None:
    record = logging.LogRecord("n", logging.INFO, __file__, 1, "m %d", (1,), None)
    assert set(json.loads(JsonFormatter().format(record))) == {"time", "level", "logger", "message"}


def test_command_line_wins_over_the_config_log_section() -> None:
    config = load_config_text("version: 1\nzones: []\nlog: {format: json, level: warning}\n")
    assert effective_logging(config, None, None) == ("warning", "json")
    assert effective_logging(config, "debug", "text") == ("debug", "text")
    assert effective_logging(load_config_text("version: 1\nzones: []\n"), None, None) == ("info", "text")
