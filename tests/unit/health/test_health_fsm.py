"""The verdict machine: first verdict at once, then rise/fall streaks, with the reasons operators see."""

from __future__ import annotations

from gslbd.clock import FakeClock
from gslbd.health.fsm import changed, initial, step
from gslbd.state.status import EndpointStatus, ProbeResult

OK = ProbeResult(ok=True, detail="HTTP 200")
FAIL = ProbeResult(ok=False, detail="timeout after 2s")


def run(results: list[ProbeResult], *, interval: float = 5.0, rise: int = 2, fall: int = 3):
    """Feed results one interval apart; the statuses after each, and the clock."""
    clock = FakeClock()
    status = EndpointStatus()
    out = []
    for result in results:
        clock.advance(interval)
        status = step(status, result, clock.wall(), rise, fall)
        out.append(status)
    return out, clock


def test_first_success_makes_the_endpoint_up_at_once() -> None:
    (after,), clock = run([OK])
    assert after.healthy is True
    assert after.last_change == clock.wall()
    assert after.last_change_reason == "first check: HTTP 200"
    assert (after.successes, after.failures) == (1, 0)


def test_first_failure_makes_the_endpoint_down_at_once() -> None:
    (after,), _ = run([FAIL])
    assert after.healthy is False
    assert after.last_change_reason == "first check: timeout after 2s"


def test_down_after_3_failures_at_5s() -> None:
    statuses, clock = run([OK, FAIL, FAIL, FAIL], interval=5.0)
    assert [s.healthy for s in statuses] == [True, True, True, False]
    down = statuses[-1]
    assert down.last_change == clock.wall()  # 15 s after the first verdict
    assert down.last_change - statuses[0].last_change == 15.0
    assert down.last_change_reason == "3 consecutive failures: timeout after 2s"
    assert down.failures == 3


def test_up_after_2_successes() -> None:
    statuses, _ = run([FAIL, OK, OK])
    assert [s.healthy for s in statuses] == [False, False, True]
    assert statuses[-1].last_change_reason == "2 consecutive successes: HTTP 200"


def test_a_success_resets_the_failure_streak() -> None:
    statuses, _ = run([OK, FAIL, FAIL, OK, FAIL, FAIL])
    assert all(s.healthy for s in statuses)
    assert statuses[-1].failures == 2
    assert statuses[3].failures == 0


def test_a_failure_resets_the_success_streak() -> None:
    statuses, _ = run([FAIL, OK, FAIL, OK])
    assert not any(s.healthy for s in statuses)
    assert statuses[-1].successes == 1


def test_fall_1_goes_down_on_the_first_failure_with_a_singular_reason() -> None:
    statuses, _ = run([OK, FAIL], rise=1, fall=1)
    assert statuses[-1].healthy is False
    assert statuses[-1].last_change_reason == "1 consecutive failure: timeout after 2s"


def test_every_result_updates_last_check_but_not_last_change() -> None:
    statuses, clock = run([OK, OK, FAIL])
    last = statuses[-1]
    assert last.last_check == clock.wall()
    assert last.last_ok is False
    assert last.last_detail == "timeout after 2s"
    assert last.last_change == statuses[0].last_change
    assert last.last_change_reason == "first check: HTTP 200"


def test_a_reason_without_detail_is_just_the_streak() -> None:
    after = step(EndpointStatus(healthy=True, failures=2), ProbeResult(ok=False), 5.0, 2, 3)
    assert after.last_change_reason == "3 consecutive failures"


def test_changed_reports_first_verdicts_and_flips_only() -> None:
    unknown = EndpointStatus()
    up = step(unknown, OK, 1.0, 2, 3)
    still_up = step(up, FAIL, 2.0, 2, 3)
    assert changed(unknown, up)
    assert not changed(up, still_up)
    down = step(step(still_up, FAIL, 3.0, 2, 3), FAIL, 4.0, 2, 3)
    assert changed(step(still_up, FAIL, 3.0, 2, 3), down)


def test_a_window_makes_it_down_when_fall_of_the_last_window_results_failed() -> None:
    clock = FakeClock()
    status = EndpointStatus()
    healthy = []
    for result in [OK, FAIL, OK, FAIL, OK, FAIL]:  # never two failures in a row
        clock.advance(1.0)
        status = step(status, result, clock.wall(), 2, 3, 5)
        healthy.append(status.healthy)
    assert healthy == [True, True, True, True, True, False]
    assert status.last_change_reason == "3 of the last 5 checks failed: timeout after 2s"


def test_failures_older_than_the_window_do_not_count() -> None:
    status = EndpointStatus()
    for at, result in enumerate([OK, FAIL, OK, OK, OK, FAIL, OK, OK, OK, FAIL]):
        status = step(status, result, float(at), 2, 2, 4)  # at most one failure in any 4 results
    assert status.healthy is True


def test_without_a_window_only_consecutive_failures_count() -> None:
    status = EndpointStatus()
    for at, result in enumerate([OK, FAIL, OK, FAIL, OK, FAIL, OK, FAIL]):
        status = step(status, result, float(at), 2, 2)
    assert status.healthy is True


def test_coming_up_forgets_the_failures_before_it() -> None:
    status = EndpointStatus()
    for at, result in enumerate([OK, FAIL, FAIL, OK, OK]):  # down after 2 of 5, up after 2 successes
        status = step(status, result, float(at), 2, 2, 5)
    assert status.healthy is True
    status = step(status, FAIL, 5.0, 2, 2, 5)  # the two failures before it no longer count
    assert status.healthy is True
    assert step(status, FAIL, 6.0, 2, 2, 5).healthy is False


def test_a_provisional_verdict_holds_until_the_first_result_which_decides_at_once() -> None:
    held = initial(False, 1.0, "initial: down (no check result yet)")
    assert held.healthy is False and held.provisional
    up = step(held, OK, 2.0, 3, 3)
    assert up.healthy is True and not up.provisional
    assert up.last_change_reason == "first check: HTTP 200"
    kept_up = initial(True, 1.0, "kept from before the restart: up, checked 3s before")
    down = step(kept_up, FAIL, 2.0, 3, 3)
    assert down.healthy is False and down.last_change_reason == "first check: timeout after 2s"
