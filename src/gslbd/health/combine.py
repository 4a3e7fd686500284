"""The verdict of an endpoint with several checks (`endpoints[].checks`, `health: all|any`): pure.

Each check has its own verdict machine (health/fsm.py: rise, fall, window); this combines their
verdicts the way k8gb's serviceHealthPolicy and Route 53's calculated checks do:

    all   up when every check is up (one check down takes the endpoint out)
    any   up when at least one check is up (out only when every check is down)

A check without a verdict yet counts as up, as a single check does before its first result; the
endpoint has no verdict while none of its checks has one. The combined status keeps its
`last_change` until the combined verdict moves, and its reason names the checks behind it:
"health all: db down (3 consecutive failures: connection refused)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gslbd.state.status import EndpointStatus
from gslbd.types import HealthMode


def check_up(status: EndpointStatus) -> bool:
    """A check's verdict as the combination counts it (none yet: up)."""
    return status.healthy is not False


def combined_up(health: HealthMode, parts: Sequence[EndpointStatus]) -> bool:
    ups = [check_up(p) for p in parts]
    return all(ups) if health is HealthMode.ALL else any(ups)


def combine(
    health: HealthMode,
    parts: Sequence[tuple[str, EndpointStatus]],
    previous: EndpointStatus,
    now: float,
) -> EndpointStatus:
    """The endpoint's status from its checks' statuses (name, status) in config order; `previous` is
    its last combined status (kept when nothing moved), `now` the wall time of this evaluation."""
    statuses = [s for _, s in parts]
    checked = [s.last_check for s in statuses if s.last_check is not None]
    details = "; ".join(f"{name}: {s.last_detail}" for name, s in parts if s.last_detail)
    last_ok = None if not checked else combined_up(health, [_last(s) for s in statuses])
    known = any(s.healthy is not None for s in statuses)
    healthy = combined_up(health, statuses) if known else None
    after = replace(
        previous,
        healthy=healthy,
        provisional=any(s.provisional for s in statuses),
        last_check=max(checked) if checked else None,
        last_ok=last_ok,
        last_detail=details,
        successes=0,
        failures=0,
        history=0,
    )
    if healthy == previous.healthy:
        return after
    return replace(after, last_change=now, last_change_reason=reason(health, parts, healthy))


def reason(health: HealthMode, parts: Sequence[tuple[str, EndpointStatus]], healthy: bool | None) -> str:
    """Why the combined verdict is what it is: the checks that decide it, with their own reasons."""
    if healthy is None:
        return f"health {health}: no check result yet"
    deciding = [(n, s) for n, s in parts if check_up(s) == healthy]
    if health is HealthMode.ALL and healthy:
        return f"health all: every check up ({', '.join(n for n, _ in parts)})"
    if health is HealthMode.ANY and not healthy:
        return f"health any: every check down ({_why(deciding)})"
    return f"health {health}: {_why(deciding)}"


def _why(parts: Sequence[tuple[str, EndpointStatus]]) -> str:
    out = []
    for name, status in parts:
        state = "up" if check_up(status) else "down"
        why = status.last_change_reason
        out.append(f"{name} {state} ({why})" if why else f"{name} {state}")
    return "; ".join(out)


def _last(status: EndpointStatus) -> EndpointStatus:
    """A status whose verdict is its last raw result (for `last_ok`)."""
    return replace(status, healthy=status.last_ok)
