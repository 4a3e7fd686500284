"""What is known about one endpoint's health: the verdict, the streak behind it, and its history."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One raw probe outcome. `detail` is short and human readable ("HTTP 200", "timeout after 2s")."""

    ok: bool
    detail: str = ""
    duration: float = 0.0


@dataclass(frozen=True, slots=True)
class EndpointStatus:
    """The health of one endpoint.

    `healthy` is None until the first verdict (the endpoint then counts as up). `successes` and
    `failures` are the current streak lengths. Times are wall-clock Unix seconds (for display and
    for the API); `last_change_reason` says why the verdict last changed.
    """

    healthy: bool | None = None
    successes: int = 0
    failures: int = 0
    last_check: float | None = None
    last_ok: bool | None = None
    last_detail: str = ""
    last_change: float | None = None
    last_change_reason: str = ""
