"""What an import gives: the services-file lines, the report of what was not mapped, or a located error."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class ImportFailure(Exception):
    """Input that cannot be imported at all (invalid YAML, an unknown kind, a reference to nothing):
    nothing is written. `line` is 1-based, None when unknown."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class Unmapped:
    """One thing the import could not carry over: the object it belongs to, its field, and why."""

    obj: str  # kind/namespace/name (k8gb) or record/<name>/<type> (octoDNS)
    field: str  # the dotted field path inside that object
    reason: str

    def __str__(self) -> str:
        return f"{self.obj}: {self.field}: {self.reason}" if self.field else f"{self.obj}: {self.reason}"


@dataclass(slots=True)
class Imported:
    """The services (each a `services[]` entry as a dict, in output order) and the report."""

    services: list[dict[str, Any]] = field(default_factory=list)
    report: list[Unmapped] = field(default_factory=list)

    def lines(self) -> str:
        """The services file text: one JSON object per line."""
        return "".join(json.dumps(service, separators=(", ", ": ")) + "\n" for service in self.services)

    def report_text(self) -> str:
        return "".join(f"{item}\n" for item in self.report)
