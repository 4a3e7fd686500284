"""Property (hypothesis, fake clock): whatever the probe results of the preferred site, the failover and
failback delays bound the answer's moves. Driven through the control plane of an App that is not
started (app/delays.py, the health book, the incremental builder), the expiry timer played by rebuilding
at the moment the earliest hold ends, as App._schedule_expiry does:

- the answer moves back to eu only once eu has been up for failback_delay, so two moves back are at
  least failback_delay apart; it moves away only once eu has been without candidates for failover_delay;
- once eu has been without candidates for failover_delay, eu is not in the answer (at every rebuild,
  the expiry's included)."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from gslbd.answer import Dynamic
from gslbd.app import App
from gslbd.clock import FakeClock
from gslbd.config import load_config_text
from gslbd.health.fsm import step
from gslbd.state.status import ProbeResult

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
EU, US = "192.0.2.10", "198.51.100.10"


def config_text(failover: float, failback: float, rise: int, fall: int) -> str:
    return f"""
version: 1
site: {{name: eu}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
checks:
  web: {{type: http, interval: 5s, rise: {rise}, fall: {fall}}}
services:
  - name: app
    policy: failover
    failover_order: [eu, us]
    failover_delay: {failover}
    failback_delay: {failback}
    check: web
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {US}, site: us}}
"""


def on_eu(app: App) -> bool:
    outcome = app.view.get(APP).outcome("A")  # type: ignore[union-attr]
    assert isinstance(outcome, Dynamic)
    return any(e.address == EU for variant in outcome.plan.variants for e in variant)


@settings(max_examples=150)
@given(
    failover=st.sampled_from([0.0, 5.0, 30.0]),
    failback=st.sampled_from([0.0, 10.0, 60.0]),
    rise=st.integers(1, 3),
    fall=st.integers(1, 3),
    results=st.lists(st.tuples(st.floats(0.5, 45.0), st.booleans()), max_size=60),
)
def test_delays_bound_the_moves_of_the_answer_and_never_keep_a_dead_site_past_failover_delay(
    failover: float, failback: float, rise: int, fall: int, results: list[tuple[float, bool]]
) -> None:
    clock = FakeClock()
    app = App(load_config_text(config_text(failover, failback, rise, fall)), clock, random.Random(1))
    app.refresh()  # App.start's first rebuild, before any probe: every site is seen (up until a verdict)
    key = (APP, EU)
    down_since: float | None = None  # eu's verdict down since (the test's own account)
    up_since: float | None = clock.wall()
    shown = on_eu(app)
    moves: dict[bool, list[float]] = {True: [], False: []}  # back to eu / away from eu: their times

    def observe() -> None:
        nonlocal shown
        now = clock.wall()
        answered = on_eu(app)
        if down_since is not None and now - down_since >= failover:
            assert not answered, f"eu down since {down_since}, still answered at {now}"
        if answered != shown:
            if answered:  # back: eu up for failback_delay
                assert up_since is not None and now - up_since >= failback - 1e-9
            else:  # away: eu without candidates for failover_delay
                assert down_since is not None and now - down_since >= failover - 1e-9
            moves[answered].append(now)
            shown = answered

    for gap, ok in results:
        target = clock.wall() + gap
        while True:  # the expiry timer: a rebuild when the earliest hold ends before the next result
            ends = [h.until for held in app.book.holds.values() for h in held]
            if not ends or min(ends) > target:
                break
            clock.advance(max(0.0, min(ends) - clock.wall()))
            app.refresh()
            observe()
        clock.advance(target - clock.wall())
        status = step(app.book.status(key), ProbeResult(ok), clock.wall(), rise, fall)
        if app.book.record(key, status):
            now = clock.wall()
            down_since, up_since = (None, now) if status.healthy else (now, None)
        app.refresh()
        observe()
    for back, times in moves.items():
        least = failback if back else failover
        assert all(b - a >= least - 1e-9 for a, b in itertools.pairwise(times))
