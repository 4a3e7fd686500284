"""The verdict machine of one endpoint: pure, so "down after 3 failures at 5 s" is an exact test.

The first result after start decides at once (until then the endpoint counts as its check's `initial`
state: up unless configured down, or the verdict a restart kept). After that an up endpoint goes down
when `fall` of its last `window` results failed (`window` defaults to `fall`: `fall` consecutive
failures) and a down endpoint comes up after `rise` consecutive successes. Coming up forgets the
failures before it, so after the first verdict every down -> up -> down cycle takes at least
`rise + fall` results: over `n` results an endpoint changes its verdict at most
`2 * (n - 1) / (rise + fall) + 2` times (the first verdict included), whatever the results are
(tests/unit/health/test_health_flapping.py holds that bound).
"""

from __future__ import annotations

from dataclasses import replace

from gslbd.state.status import EndpointStatus, ProbeResult


def _streak(count: int, ok: bool) -> str:
    if ok:
        return f"{count} consecutive success" + ("" if count == 1 else "es")
    return f"{count} consecutive failure" + ("" if count == 1 else "s")


def step(
    status: EndpointStatus, result: ProbeResult, now: float, rise: int, fall: int, window: int | None = None
) -> EndpointStatus:
    """The status after `result` arrived at wall time `now`.

    `last_change_reason` reads "first check: HTTP 200" for the first verdict and
    "3 consecutive failures: timeout after 2s" / "3 of the last 5 checks failed: HTTP 503" /
    "2 consecutive successes: HTTP 200" later.
    """
    fall = max(1, fall)
    size = max(fall, window or fall)
    successes = status.successes + 1 if result.ok else 0
    failures = 0 if result.ok else status.failures + 1
    history = ((status.history << 1) | (0 if result.ok else 1)) & ((1 << size) - 1)
    after = replace(
        status,
        successes=successes,
        failures=failures,
        history=history,
        last_check=now,
        last_ok=result.ok,
        last_detail=result.detail,
    )
    if status.healthy is None or status.provisional:
        return replace(
            after,
            healthy=result.ok,
            provisional=False,
            last_change=now,
            last_change_reason=_reason("first check", result),
        )
    failed = max(min(failures, size), history.bit_count())
    if status.healthy and failed >= fall:
        why = _streak(failures, False) if failures >= fall else f"{failed} of the last {size} checks failed"
        return replace(after, healthy=False, last_change=now, last_change_reason=_reason(why, result))
    if not status.healthy and successes >= max(1, rise):
        return replace(
            after,
            healthy=True,
            history=0,
            last_change=now,
            last_change_reason=_reason(_streak(successes, True), result),
        )
    return after


def initial(healthy: bool, now: float, why: str, checked: float | None = None) -> EndpointStatus:
    """A verdict held until the endpoint's first result, which then decides at once: a check's
    `initial: down`, or the verdict a restart kept (`why` says which; `checked` is the time of the
    result behind a kept verdict)."""
    return EndpointStatus(
        healthy=healthy, provisional=True, last_check=checked, last_change=now, last_change_reason=why
    )


def _reason(why: str, result: ProbeResult) -> str:
    return f"{why}: {result.detail}" if result.detail else why


def changed(before: EndpointStatus, after: EndpointStatus) -> bool:
    """True when the verdict moved (including the first verdict: unknown -> up or down)."""
    return before.healthy != after.healthy
