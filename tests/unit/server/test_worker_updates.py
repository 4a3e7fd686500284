"""What crosses a worker's pipe: a new config with the whole snapshot once, then only the entries of
the services a change touched; applied, they give the worker the parent's snapshot."""

from __future__ import annotations

import pickle
import random
from dataclasses import replace

import pytest

from gslbd.config import load_config_text
from gslbd.policy.locate import build_env
from gslbd.server.build import AnswerBuilder
from gslbd.server.workers import _apply_delta, _full_snapshot, _pack_delta, _pack_full, _Services
from gslbd.state.book import HealthBook
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
