"""What crosses a worker's pipe: a new config with the whole snapshot once, then only the entries of
the services a change touched; applied, they give the worker the parent's snapshot."""

from __future__ import annotations

import pickle
import random
from dataclasses import replace

import pytest

from gslbd.answer import Dynamic, build_view
from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.policy.locate import build_env
from gslbd.server.build import AnswerBuilder
from gslbd.server.workers import _apply_delta, _full_snapshot, _pack_delta, _pack_full, _Services
from gslbd.state.book import HealthBook
from gslbd.state.hold import Hold
from gslbd.state.snapshot import Snapshot
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState
from gslbd.wire import AnswerTable

SERVICES = "".join(
    f"  - {{name: s{i}, endpoints: [{{address: 192.0.2.{n}}}, {{address: 198.51.100.{n}}}]}}\n"
    for i, n in ((i, i % 250 + 1) for i in range(2000))
)
CONFIG = (
    "dns: {listen: ['127.0.0.1:5353'], workers: 2}\nzones:\n  - origin: gslb.test.\n"
    "    nameservers: [{name: ns1.gslb.test., address: 127.0.0.1}]\nservices:\n" + SERVICES
)


def test_a_verdict_sends_the_workers_its_service_and_not_the_config() -> None:
    config = load_config_text(CONFIG)
    services = {s.name: s for s in config.services}
    book = HealthBook()
    for i in range(0, 2000, 3):
        book.record((f"s{i}.gslb.test.", f"192.0.2.{i % 250 + 1}"), EndpointStatus(healthy=i % 2 == 0))
    full = _pack_full(config, book.snapshot())
    worker = _full_snapshot(pickle.loads(full))
    book.take_touched()

    book.record(("s7.gslb.test.", "192.0.2.8"), EndpointStatus(healthy=False))
    book.set_admin(("s9.gslb.test.", "198.51.100.10"), AdminState.DOWN)
    parent = book.snapshot()
    touched = book.take_touched()
    assert touched == {"s7.gslb.test.", "s9.gslb.test."}
    delta = _pack_delta(services, parent, touched)
    assert len(delta) * 50 < len(full)  # the change, not the config and every verdict
    worker = _apply_delta(worker, pickle.loads(delta))
    assert dict(worker.health) == dict(parent.health)
    assert dict(worker.admin) == dict(parent.admin)
    assert worker.version == parent.version


def answers(table: AnswerTable) -> dict[bytes, list[bytes]]:
    return {
        key: [v.sections for e in (*n.types.values(), n.default) for v in e.variants]
        for key, n in table.names.items()
    }


@pytest.mark.parametrize("edit", ["change", "add", "remove"])
def test_a_services_reload_sends_the_workers_those_services_and_they_build_what_the_parent_has(
    edit: str,
) -> None:
    """The parent sends a config that differs only in services as those services (and the order when
    some came or went); the worker's config is then equal to the parent's, and its rebased builder
    answers like a whole build of it."""
    config = load_config_text(CONFIG)
    book = HealthBook()
    snapshot = book.snapshot()
    worker_config = pickle.loads(_pack_full(config, snapshot)).config
    mirror = _Services(worker_config)
    env = build_env(worker_config, random.Random(1))
    builder = AnswerBuilder()
    builder.build(worker_config, snapshot, env)

    services = list(config.services)
    if edit == "change":
        endpoint = replace(services[5].endpoints[0], address="203.0.113.5")
        services[5] = replace(services[5], endpoints=(endpoint,))
    elif edit == "add":
        services.insert(3, replace(services[0], name="new.gslb.test.", label="new"))
    else:
        del services[7]
    new = replace(config, services=tuple(services))
    parent = _Services(config)  # what the parent keeps of the config the workers have
    diff, order = parent.diff(new, {s.name: s for s in new.services})
    assert parent.names == [s.name for s in new.services]
    payload = _pack_delta(parent.by_name, snapshot, diff.touched, (diff, order))
    assert len(payload) * 50 < len(_pack_full(new, snapshot))  # the change, not the config

    update = pickle.loads(payload)
    applied, worker_diff = mirror.apply(worker_config, update)
    assert applied == new
    assert (worker_diff.changed, worker_diff.added, worker_diff.removed) == (
        diff.changed,
        diff.added,
        diff.removed,
    )
    assert builder.rebase(applied, env, worker_diff)
    table = builder.build(applied, _apply_delta(snapshot, update), env, update.touched)[1]
    assert not builder.last_full
    whole = AnswerBuilder().build(new, snapshot, build_env(new, random.Random(1)))[1]
    assert answers(table) == answers(whole)


DELAYED = """
dns: {listen: ['127.0.0.1:5353'], workers: 2}
zones:
  - origin: gslb.test.
    nameservers: [{name: ns1.gslb.test., address: 127.0.0.1}]
checks:
  web: {type: http, interval: 5s, rise: 2, fall: 3}
services:
  - name: app
    policy: failover
    failover_order: [eu, us]
    failover_delay: 30s
    ttl: {max: 300, min: 1}
    check: web
    endpoints: [{address: 192.0.2.1, site: eu}, {address: 198.51.100.1, site: us}]
  - name: other
    endpoints: [{address: 192.0.2.9}]
"""


def test_holds_and_the_statuses_of_a_health_driven_ttl_reach_the_workers_which_answer_as_the_parent() -> None:
    config = load_config_text(DELAYED)
    services = {s.name: s for s in config.services}
    env = build_env(config, random.Random(1))
    book = HealthBook()
    up = EndpointStatus(healthy=True, successes=3, last_check=1000.0)
    for key in (("app.gslb.test.", "192.0.2.1"), ("app.gslb.test.", "198.51.100.1")):
        book.record(key, up)
    first = book.snapshot(taken_at=1000.5)
    worker = _full_snapshot(pickle.loads(_pack_full(config, first)))
    builder = AnswerBuilder()
    builder.build(config, worker, env)
    book.take_touched()

    book.record(("app.gslb.test.", "192.0.2.1"), EndpointStatus(healthy=False, failures=3, last_check=1003.0))
    book.set_holds({"app.gslb.test.": (Hold("eu", "failover", 1003.0, 1033.0, 30.0),)})
    parent = book.snapshot(taken_at=1003.0)
    touched = book.take_touched()
    assert touched == {"app.gslb.test."}
    worker = _apply_delta(worker, pickle.loads(_pack_delta(services, parent, touched)))
    assert dict(worker.holds) == dict(parent.holds)
    table = builder.build(config, worker, env, touched)[1]
    whole = AnswerBuilder().build(config, parent, env)[1]
    assert answers(table) == answers(whole)
    # eu held (answered although down) with TTL 10: eu needs rise 2 x 5 s; the hold ends in 30
    outcome = whole_view_outcome(config, parent)
    assert "failover held until" in outcome

    book.set_holds({})  # the hold ended: the workers drop it too
    ended = book.snapshot(taken_at=1033.0)
    worker = _apply_delta(worker, pickle.loads(_pack_delta(services, ended, book.take_touched())))
    assert dict(worker.holds) == {}


def whole_view_outcome(config: Config, snapshot: Snapshot) -> str:
    view = build_view(config, snapshot, build_env(config, random.Random(1)))
    outcome = view.get("app.gslb.test.").outcome("A")  # type: ignore[union-attr]
    assert isinstance(outcome, Dynamic)
    assert {rr.ttl for rr in outcome.records(0)} == {10}
    return outcome.reason
