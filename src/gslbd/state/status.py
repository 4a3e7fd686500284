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

    `healthy` is None until the first verdict (the endpoint then counts as up). `provisional`: the
    verdict is not a result but what holds until the first one (a check's `initial: down`, or a
    verdict kept across a restart); the first result then decides at once. `successes` and
    `failures` are the current streak lengths; `history` holds the latest results as bits (1 a
    failure, the newest lowest), as many as the check's `window`. Times are wall-clock Unix seconds
    (for display and for the API); `last_change_reason` says why the verdict last changed.
    """

    healthy: bool | None = None
    successes: int = 0
    failures: int = 0
    history: int = 0
    provisional: bool = False
    last_check: float | None = None
    last_ok: bool | None = None
    last_detail: str = ""
    last_change: float | None = None
    last_change_reason: str = ""
