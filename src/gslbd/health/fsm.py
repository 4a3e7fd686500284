"""The verdict machine of one endpoint: pure, so "down after 3 failures at 5 s" is an exact test.

The first result after start decides at once (until then the endpoint counts as up). After that an
endpoint goes down after `fall` consecutive failures and up after `rise` consecutive successes; a
result of the other kind resets the streak.
"""

from __future__ import annotations

from dataclasses import replace

from gslbd.state.status import EndpointStatus, ProbeResult


def _streak(count: int, ok: bool) -> str:
    if ok:
        return f"{count} consecutive success" + ("" if count == 1 else "es")
    return f"{count} consecutive failure" + ("" if count == 1 else "s")


def step(status: EndpointStatus, result: ProbeResult, now: float, rise: int, fall: int) -> EndpointStatus:
    """The status after `result` arrived at wall time `now`.

    `last_change_reason` reads "first check: HTTP 200" for the first verdict and
    "3 consecutive failures: timeout after 2s" / "2 consecutive successes: HTTP 200" later.
    """
    successes = status.successes + 1 if result.ok else 0
    failures = 0 if result.ok else status.failures + 1
    after = replace(
        status,
        successes=successes,
        failures=failures,
        last_check=now,
        last_ok=result.ok,
        last_detail=result.detail,
    )
    if status.healthy is None:
        return replace(
            after, healthy=result.ok, last_change=now, last_change_reason=_reason("first check", result)
        )
    if status.healthy and failures >= max(1, fall):
        return replace(
            after,
            healthy=False,
            last_change=now,
            last_change_reason=_reason(_streak(failures, False), result),
        )
    if not status.healthy and successes >= max(1, rise):
        return replace(
            after, healthy=True, last_change=now, last_change_reason=_reason(_streak(successes, True), result)
        )
    return after


def _reason(why: str, result: ProbeResult) -> str:
    return f"{why}: {result.detail}" if result.detail else why


def changed(before: EndpointStatus, after: EndpointStatus) -> bool:
    """True when the verdict moved (including the first verdict: unknown -> up or down)."""
    return before.healthy != after.healthy
