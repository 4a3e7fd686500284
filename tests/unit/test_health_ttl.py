"""The health-driven TTL (`services[].ttl: {max, min}`, answer/ttl.py): the least time until the answer
could change, from the statuses when the answer is built, clamped to [min, max]; a plain number stays a
fixed TTL. Config errors are located."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from gslbd.answer import Dynamic, build_view
from gslbd.config import check_config_text, load_config_text
from gslbd.explain import explain
from gslbd.model.config import Config
from gslbd.policy.locate import build_env
from gslbd.state.hold import Hold
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
EU, EU2, US = "192.0.2.10", "192.0.2.11", "198.51.100.10"
NOW = 1_700_000_000.0

CONFIG = f"""
version: 1
site: {{name: eu}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 192.0.2.53}}]
checks:
  web: {{type: http, interval: 5s, rise: 2, fall: 3}}
services:
  - name: app
    policy: failover
    failover_order: [eu, us]
    ttl: {{max: 300, min: 5}}
    check: web
    endpoints:
      - {{address: {EU}, site: eu}}
      - {{address: {EU2}, site: eu}}
      - {{address: {US}, site: us}}
"""
UP = EndpointStatus(healthy=True, successes=10, last_check=NOW)
DOWN = EndpointStatus(healthy=False, failures=3, history=0b111, last_check=NOW)


def ttl_of(config: Config, statuses: dict[str, EndpointStatus], **snapshot: Any) -> int:
    health = {(APP, a): s.healthy for a, s in statuses.items() if s.healthy is not None}
    snap = replace(
        Snapshot(1, health, taken_at=NOW, statuses={(APP, a): s for a, s in statuses.items()}), **snapshot
    )
    view = build_view(config, snap, build_env(config, random.Random(1)))
    outcome = view.get(APP).outcome("A")  # type: ignore[union-attr]
    assert isinstance(outcome, Dynamic)
    ttls = {rr.ttl for i in range(len(outcome.plan.variants)) for rr in outcome.records(i)}
    assert len(ttls) == 1
    return ttls.pop()


def test_every_endpoint_up_gives_fall_times_interval() -> None:
    config = load_config_text(CONFIG)
    assert ttl_of(config, {EU: UP, EU2: UP, US: UP}) == 15  # 3 more failed probes at 5 s


def test_the_failures_already_in_the_window_and_the_time_since_the_last_probe_count() -> None:
    config = load_config_text(CONFIG)
    failing = replace(UP, successes=0, failures=1, history=1, last_check=NOW - 2.7)
    # (3 - 1) x 5 - 2 (whole seconds since the last check, rounded down) = 8
    assert ttl_of(config, {EU: failing, EU2: UP, US: UP}) == 8


def test_a_down_endpoint_counts_rise_times_interval() -> None:
    config = load_config_text(CONFIG.replace("min: 5", "min: 1"))
    assert ttl_of(config, {EU: DOWN, EU2: UP, US: UP}) == 10  # 2 successes bring EU back


def test_the_ttl_never_falls_below_min_nor_rises_above_max() -> None:
    config = load_config_text(CONFIG)
    before_first = EndpointStatus()  # no result yet: the next one decides at once (1 x 5 s)
    assert ttl_of(config, {EU: before_first, EU2: UP, US: UP}) == 5
    late = replace(UP, failures=2, history=0b11, successes=0, last_check=NOW - 4.5)
    assert ttl_of(config, {EU: late, EU2: UP, US: UP}) == 5  # 1 x 5 - 4 = 1, raised to min
    capped = load_config_text(CONFIG.replace("max: 300", "max: 12"))
    assert ttl_of(capped, {EU: UP, EU2: UP, US: UP}) == 12


def test_endpoints_forced_by_an_admin_cannot_change_the_answer_so_the_ttl_is_max() -> None:
    config = load_config_text(CONFIG)
    admin = {(APP, a): AdminState.UP for a in (EU, EU2, US)}
    assert ttl_of(config, {EU: UP, EU2: UP, US: UP}, admin=admin) == 300


def test_a_failover_delay_is_added_when_the_change_would_empty_the_site() -> None:
    text = CONFIG.replace("    check: web\n", "    check: web\n    failover_delay: 20s\n")
    config = load_config_text(text)
    # us's only endpoint: 15 + 20; eu has two up: one of them failing does not empty eu (15)
    assert ttl_of(config, {EU: UP, EU2: UP, US: UP}) == 15
    assert ttl_of(config, {EU: UP, EU2: DOWN, US: UP}) == 10  # EU2 back after 2 x 5
    lone = load_config_text(text.replace(f"      - {{address: {EU2}, site: eu}}\n", ""))
    assert ttl_of(lone, {EU: UP, US: UP}) == 35  # 3 x 5 + failover_delay 20


def test_a_hold_ending_first_sets_the_ttl() -> None:
    config = load_config_text(CONFIG.replace("min: 5", "min: 1"))
    hold = Hold("eu", "failback", NOW - 50, NOW + 7.5, 57.5)
    assert ttl_of(config, {EU: UP, EU2: UP, US: UP}, holds={APP: (hold,)}) == 7


def test_a_plain_number_stays_a_fixed_ttl() -> None:
    config = load_config_text(CONFIG.replace("ttl: {max: 300, min: 5}", "ttl: 42"))
    assert config.services[0].ttl_range is None
    assert ttl_of(config, {EU: DOWN, EU2: UP, US: UP}) == 42


def test_explain_shows_the_health_driven_ttl() -> None:
    config = load_config_text(CONFIG)
    env = build_env(config, random.Random(1))
    view = build_view(config, Snapshot(1, {}, taken_at=NOW), env)
    text = explain(config, view, env, APP, "A", "203.0.113.5")
    assert (
        "  ttl: health-driven, 5 now (the least time until the answer could change, "
        "between min 5 and max 300)" in text
    )


def test_min_above_max_and_negative_values_are_located_errors() -> None:
    bad = CONFIG.replace("ttl: {max: 300, min: 5}", "ttl: {max: 5, min: 10}")
    _, problems = check_config_text(bad, "c.yaml")
    assert [str(p) for p in problems] == ["c.yaml:13: services[0].ttl.min: min 10 is more than max 5"]
    negative = CONFIG.replace("ttl: {max: 300, min: 5}", "ttl: {max: 300, min: -1, top: 2}")
    _, problems = check_config_text(negative, "c.yaml")
    assert [str(p) for p in problems] == [
        "c.yaml:13: services[0].ttl.top: unknown key 'top'; valid keys: max, min",
        "c.yaml:13: services[0].ttl.min: must be between 0 and 2147483647, got -1",
    ]
    missing = CONFIG.replace("ttl: {max: 300, min: 5}", "ttl: {min: 5}")
    _, problems = check_config_text(missing, "c.yaml")
    assert [str(p) for p in problems] == ["c.yaml:13: services[0].ttl.max: required key is missing"]


def test_endpoints_of_a_peer_site_are_not_counted() -> None:
    text = CONFIG.replace(
        "checks:", 'peers:\n  sites:\n    - {name: us, nameservers: ["198.51.100.53:53"]}\nchecks:'
    )
    config = load_config_text(text)
    # us's configured endpoint is learned from us, not probed here: only eu's two count (3 x 5 s)
    assert ttl_of(config, {EU: UP, EU2: UP}) == 15
