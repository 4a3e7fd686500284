"""health/combine.py: an endpoint with several checks is up when all (or any) of their verdicts are."""

from __future__ import annotations

from gslbd.health.combine import combine
from gslbd.health.fsm import step
from gslbd.state.status import EndpointStatus, ProbeResult
from gslbd.types import HealthMode

UP = EndpointStatus(healthy=True, last_check=10.0, last_ok=True, last_detail="HTTP 200")
DOWN = EndpointStatus(
    healthy=False,
    last_check=12.0,
    last_ok=False,
    last_detail="connection refused",
    last_change_reason="3 consecutive failures: connection refused",
)
NONE_YET = EndpointStatus()


def test_health_all_is_down_as_soon_as_one_check_is_down_and_names_it() -> None:
    after = combine(HealthMode.ALL, [("web", UP), ("db", DOWN)], EndpointStatus(healthy=True), 20.0)
    assert after.healthy is False
    assert after.last_change == 20.0
    assert after.last_change_reason == "health all: db down (3 consecutive failures: connection refused)"
    assert after.last_check == 12.0 and after.last_detail == "web: HTTP 200; db: connection refused"


def test_health_any_stays_up_until_every_check_is_down() -> None:
    one = combine(HealthMode.ANY, [("web", UP), ("db", DOWN)], EndpointStatus(healthy=True), 20.0)
    assert one.healthy is True and one.last_change is None  # nothing moved: the last change is kept
    both = combine(HealthMode.ANY, [("web", DOWN), ("db", DOWN)], one, 30.0)
    assert both.healthy is False and both.last_change == 30.0
    assert both.last_change_reason.startswith("health any: every check down (web down (")


def test_a_check_without_a_result_counts_as_up_and_no_result_at_all_is_no_verdict() -> None:
    assert combine(HealthMode.ALL, [("web", UP), ("db", NONE_YET)], EndpointStatus(), 1.0).healthy is True
    assert (
        combine(HealthMode.ALL, [("web", NONE_YET), ("db", NONE_YET)], EndpointStatus(), 1.0).healthy is None
    )
    back = combine(HealthMode.ALL, [("web", UP), ("db", UP)], EndpointStatus(healthy=False), 5.0)
    assert back.last_change_reason == "health all: every check up (web, db)"


def test_each_check_keeps_its_own_rise_and_fall() -> None:
    web, db = EndpointStatus(), EndpointStatus()
    web = step(web, ProbeResult(True), 1.0, rise=2, fall=3)
    db = step(db, ProbeResult(True), 1.0, rise=1, fall=1)
    combined = combine(HealthMode.ALL, [("web", web), ("db", db)], EndpointStatus(), 1.0)
    assert combined.healthy is True
    for now in (2.0, 3.0):  # two failures of web: below its fall of 3
        web = step(web, ProbeResult(False, "HTTP 503"), now, rise=2, fall=3)
        combined = combine(HealthMode.ALL, [("web", web), ("db", db)], combined, now)
    assert combined.healthy is True
    db = step(db, ProbeResult(False, "refused"), 4.0, rise=1, fall=1)  # db's fall of 1: down at once
    combined = combine(HealthMode.ALL, [("web", web), ("db", db)], combined, 4.0)
    assert combined.healthy is False and combined.last_change_reason.startswith("health all: db down (")
