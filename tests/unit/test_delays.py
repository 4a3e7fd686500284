"""services[].failover_delay / failback_delay through the control plane (app/delays.py, an App that is
not started, on a fake clock): the answer stays on a site that lost its candidates until failover_delay
has passed, comes back only failback_delay after it recovered, never moves for a shorter blip, and
`gslbd explain` says until when a delay holds it. Config errors are located."""

from __future__ import annotations

import random

from gslbd.answer import Dynamic
from gslbd.app import App
from gslbd.clock import FakeClock
from gslbd.config import check_config_text, load_config_text
from gslbd.explain import explain
from gslbd.health.fsm import step
from gslbd.model.service import Endpoint
from gslbd.state.status import ProbeResult
from gslbd.types import EndpointKind

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
EU, US = "192.0.2.10", "198.51.100.10"

CONFIG = f"""
version: 1
site: {{name: eu}}
dns: {{listen: ["127.0.0.1:0"]}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
checks:
  web: {{type: http, interval: 5s, rise: 1, fall: 1}}
services:
  - name: app
    policy: failover
    failover_order: [eu, us]
    failover_delay: 30s
    failback_delay: 1m
    check: web
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {US}, site: us}}
"""


def make_app(text: str = CONFIG) -> tuple[App, FakeClock]:
    clock = FakeClock()
    app = App(load_config_text(text), clock, random.Random(1))
    probe(app, EU, True)
    probe(app, US, True)
    return app, clock


def probe(app: App, address: str, ok: bool) -> None:
    """One result of `address`'s check, recorded as App._on_result does, then the rebuild it schedules."""
    key = (APP, address)
    app.book.record(
        key,
        step(app.book.status(key), ProbeResult(ok, "HTTP 200" if ok else "HTTP 503"), app.clock.wall(), 1, 1),
    )
    app.refresh()


def later(app: App, clock: FakeClock, seconds: float) -> None:
    """Time passes; then the rebuild the expiry timer would run."""
    clock.advance(seconds)
    app.refresh()


def answered(app: App) -> list[str]:
    outcome = app.view.get(APP).outcome("A")  # type: ignore[union-attr]
    assert isinstance(outcome, Dynamic)
    return sorted({e.address for variant in outcome.plan.variants for e in variant})


def reason(app: App) -> str:
    outcome = app.view.get(APP).outcome("A")  # type: ignore[union-attr]
    assert isinstance(outcome, Dynamic)
    return outcome.reason


def test_the_answer_stays_on_the_preferred_site_until_failover_delay_has_passed() -> None:
    app, clock = make_app()
    probe(app, EU, False)  # at 00:00:00 wall + 1000 s of the fake clock
    assert answered(app) == [EU]
    assert "failover held until" in reason(app)
    later(app, clock, 29.9)
    assert answered(app) == [EU]
    later(app, clock, 0.1)
    assert answered(app) == [US]
    assert "held" not in reason(app)


def test_the_answer_moves_back_only_failback_delay_after_the_site_is_healthy_again() -> None:
    app, clock = make_app()
    probe(app, EU, False)
    later(app, clock, 30)
    assert answered(app) == [US]
    probe(app, EU, True)
    assert answered(app) == [US]
    assert "failback held until" in reason(app)
    later(app, clock, 59.9)
    assert answered(app) == [US]
    later(app, clock, 0.1)
    assert answered(app) == [EU]


def test_a_failure_shorter_than_failover_delay_never_moves_the_answer() -> None:
    app, clock = make_app()
    probe(app, EU, False)
    later(app, clock, 20)
    probe(app, EU, True)
    later(app, clock, 100)
    assert answered(app) == [EU]
    assert app.book.holds == {}


def test_failback_is_not_held_when_no_other_site_has_candidates() -> None:
    app, clock = make_app()
    probe(app, EU, False)
    later(app, clock, 30)
    probe(app, US, False)
    later(app, clock, 30)  # every site without candidates for 30 s: all_down serves all
    probe(app, EU, True)
    assert answered(app) == [EU]
    assert "answered before its failback_delay 60s is over (no other site has candidates)" in reason(app)


def test_the_rebuild_time_is_when_the_earliest_hold_ends() -> None:
    app, clock = make_app()
    probe(app, EU, False)
    now = clock.wall()
    assert app._delays.update(app.config, app.book, now) == now + 30  # what App._schedule_expiry waits for


def test_explain_says_until_when_failback_is_held() -> None:
    app, clock = make_app()
    probe(app, EU, False)
    later(app, clock, 30)
    probe(app, EU, True)  # the fake clock's wall time: 1,700,001,030 s = 22:30:30 UTC
    text = explain(app.config, app.view, app.env, APP, "A", "203.0.113.5")
    assert "  delays: failover_delay 30s, failback_delay 60s" in text
    assert (
        "site eu healthy again since 22:30:30.0Z: failback held until 22:31:30.0Z (failback_delay 60s)"
        in text
    )


def test_negative_or_unparsable_delays_are_located_errors() -> None:
    bad = CONFIG.replace("failover_delay: 30s", "failover_delay: -5").replace(
        "failback_delay: 1m", "failback_delay: later"
    )
    _, problems = check_config_text(bad, "c.yaml")
    assert [str(p) for p in problems] == [
        "c.yaml:14: services[0].failover_delay: must not be negative, got -5",
        "c.yaml:15: services[0].failback_delay: invalid duration 'later'; use seconds or a number with a "
        "unit: 500ms, 5s, 2m, 1h",
    ]


def test_delays_default_to_0s_and_move_the_answer_at_once() -> None:
    text = CONFIG.replace("    failover_delay: 30s\n", "").replace("    failback_delay: 1m\n", "")
    app, _ = make_app(text)
    assert (app.config.services[0].failover_delay, app.config.services[0].failback_delay) == (0.0, 0.0)
    probe(app, EU, False)
    assert answered(app) == [US]
    probe(app, EU, True)
    assert answered(app) == [EU]


def test_a_peer_site_that_stops_publishing_counts_as_without_candidates_and_its_return_is_held() -> None:
    text = (
        CONFIG.replace(f"      - {{address: {US}, site: us}}\n", "")
        .replace("failover_order: [eu, us]", "failover_order: [us, eu]")
        .replace("checks:", 'peers:\n  sites:\n    - {name: us, nameservers: ["198.51.100.53:53"]}\nchecks:')
    )
    clock = FakeClock()
    app = App(load_config_text(text), clock, random.Random(1))
    learned = Endpoint(APP, US, EndpointKind.IPV4, "us")
    app.book.set_peer_endpoints({APP: (learned,)})
    probe(app, EU, True)
    assert answered(app) == [US]
    app.book.set_peer_endpoints({})  # us publishes no endpoint of app any more: nothing to hold
    later(app, clock, 1)
    assert answered(app) == [EU]
    app.book.set_peer_endpoints({APP: (learned,)})  # back: failback_delay holds it out
    app.refresh()
    assert answered(app) == [EU]
    assert "site us healthy again since" in reason(app)
    later(app, clock, 60)
    assert answered(app) == [US]
