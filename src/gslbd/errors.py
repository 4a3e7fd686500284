"""The gslbd exception tree.

GslbdError                  base of everything gslbd raises on purpose
+-- ConfigError             a configuration could not be loaded; carries every problem at once
+-- StateError              the state store refused or lost an operation
+-- SafetyRefused           a change would break a safety rule (not forced)
+-- WireError               a DNS message could not be parsed or rendered
    +-- FormError           the message is malformed but has a readable header (answer FORMERR)
"""

from __future__ import annotations

from dataclasses import dataclass


class GslbdError(Exception):
    """Base class of every error gslbd raises on purpose."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One configuration problem: where it is and what is wrong."""

    file: str
    line: int | None
    path: str
    message: str
    severity: str = "error"  # "error" or "warning"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {self.message}"


class ConfigError(GslbdError):
    """A configuration file has errors; `problems` lists every one of them."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class StateError(GslbdError):
    """The state store could not do what was asked."""


class NotPushed(GslbdError):
    """A result was pushed for an endpoint whose check is not a push check here (the API: 409)."""


@dataclass(frozen=True, slots=True)
class RuleBreach:
    """A safety rule a change would break: its name (`safety[0]`), the message naming it, and the
    services it would break it for."""

    rule: str
    message: str
    services: tuple[str, ...]


class SafetyRefused(GslbdError):
    """An admin change or a reload would break safety rules that hold now (the API: 409; force with
    `"force": true`). `breaches` names each rule."""

    def __init__(self, breaches: list[RuleBreach]) -> None:
        self.breaches = breaches
        super().__init__("; ".join(b.message for b in breaches))


class WireError(GslbdError):
    """A DNS message could not be parsed or rendered."""


class FormError(WireError):
    """The message is malformed but its header is readable: answer FORMERR."""
