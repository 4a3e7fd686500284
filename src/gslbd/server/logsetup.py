"""Where log lines go and what they look like: text, or one JSON object per line (`log.format: json`).

A JSON line holds `time` (ISO 8601, UTC, milliseconds), `level`, `logger` and `message`, then every field a
call site passed with `extra={...}` (verdicts, reloads, admin changes and peer events carry an `event` name
and their subjects, see docs/operations.md), then `exception` when there is a traceback. Worker processes
log the same way, with a `worker` field (text: `gslbd[worker-N]`).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from gslbd.types import LogFormat

TEXT_FORMAT = "%(asctime)s {who} %(levelname)s %(name)s: %(message)s"

# The attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}

_active = LogFormat.TEXT


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line. `fields` are added to every record (a worker's index)."""

    def __init__(self, fields: dict[str, Any] | None = None) -> None:
        super().__init__()
        self._fields = dict(fields or {})

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")[:-6] + "Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update(self._fields)
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in out and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False, separators=(",", ":"))


def level_number(level: str | int) -> int:
    """ "debug" ... "error" (any case) or a logging level number -> the number; unknown names -> INFO."""
    if isinstance(level, int):
        return level
    number = logging.getLevelName(level.upper())
    return number if isinstance(number, int) else logging.INFO


def setup_logging(
    level: str | int,
    fmt: LogFormat | str = LogFormat.TEXT,
    *,
    worker: int | None = None,
    stream: TextIO | None = None,
) -> int:
    """Log to `stream` (stderr) at `level` in format `fmt`, replacing any earlier setup; returns the
    level's number. `worker`: this is worker process N (its lines say so)."""
    global _active
    numeric = level_number(level)
    fmt = LogFormat(fmt)
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    if fmt is LogFormat.JSON:
        handler.setFormatter(JsonFormatter({"worker": worker} if worker is not None else None))
    else:
        who = "gslbd" if worker is None else f"gslbd[worker-{worker}]"
        handler.setFormatter(logging.Formatter(TEXT_FORMAT.format(who=who)))
    logging.basicConfig(level=numeric, handlers=[handler], force=True)
    _active = fmt
    return numeric


def active_format() -> LogFormat:
    """The format of the latest `setup_logging` in this process (what worker processes are started with)."""
    return _active
