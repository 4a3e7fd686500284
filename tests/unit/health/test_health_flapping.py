"""No sequence of probe results makes a verdict flap faster than rise, fall and window allow."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gslbd.health.fsm import initial, step
from gslbd.state.status import EndpointStatus, ProbeResult

OK = ProbeResult(ok=True)
FAIL = ProbeResult(ok=False)


def transitions(results: list[bool], rise: int, fall: int, window: int, start: EndpointStatus) -> list[int]:
    """The indexes of the results that changed the verdict."""
    status, out = start, []
    for at, ok in enumerate(results):
        after = step(status, OK if ok else FAIL, float(at), rise, fall, window)
        if after.healthy != status.healthy or (status.provisional and after.healthy is not None):
            out.append(at)
        status = after
    return out


settings_ = settings(max_examples=400, deadline=None)
results_ = st.lists(st.booleans(), max_size=200)
thresholds = st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(0, 12))


@settings_
@given(results_, thresholds, st.sampled_from(["unknown", "held up", "held down"]))
def test_transitions_over_n_results_are_at_most_the_first_verdict_and_one_more_per_rise_plus_fall_half(
    results: list[bool], limits: tuple[int, int, int], start_kind: str
) -> None:
    rise, fall, window = limits
    window = window and max(window, fall)
    start = {
        "unknown": EndpointStatus(),
        "held up": initial(True, 0.0, "kept"),
        "held down": initial(False, 0.0, "initial: down"),
    }[start_kind]
    changes = transitions(results, rise, fall, window, start)
    assert len(changes) <= 2 * max(0, len(results) - 1) / (rise + fall) + 2


@settings_
@given(results_, thresholds)
def test_between_two_changes_lie_at_least_rise_or_fall_results(
    results: list[bool], limits: tuple[int, int, int]
) -> None:
    rise, fall, window = limits
    window = window and max(window, fall)
    status = EndpointStatus()
    last: int | None = None
    for at, ok in enumerate(results):
        after = step(status, OK if ok else FAIL, float(at), rise, fall, window)
        if status.healthy is not None and after.healthy != status.healthy:
            if last is not None:
                assert at - last >= (rise if after.healthy else fall)
            last = at
        elif status.healthy is None:
            last = at
        status = after


@settings_
@given(st.lists(st.booleans(), min_size=1, max_size=100), st.integers(1, 6), st.integers(1, 12))
def test_a_window_never_makes_it_down_later_than_consecutive_failures_would(
    results: list[bool], fall: int, extra: int
) -> None:
    """A window only adds ways to go down: fall consecutive failures still do it."""
    plain, windowed = EndpointStatus(), EndpointStatus()
    for at, ok in enumerate(results):
        plain = step(plain, OK if ok else FAIL, float(at), 1, fall)
        windowed = step(windowed, OK if ok else FAIL, float(at), 1, fall, fall + extra)
        if plain.healthy is False and plain.last_change == float(at):
            assert windowed.healthy is False
