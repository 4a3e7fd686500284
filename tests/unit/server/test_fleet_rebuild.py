"""A fleet-wide load update (every service rebuilt) updates the table name by name (server/build.py): the
table it ends with is whole (no name left to `fill`, so none to the slow path) and answers every name
exactly as a table built from nothing for the same snapshot does, and the answer counters carry on."""

from __future__ import annotations

import random

import dns.message

from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.policy.load import NO_LOAD, observe
from gslbd.policy.locate import build_env
from gslbd.server.build import AnswerBuilder
from gslbd.state.book import HealthBook
from gslbd.wire import AnswerTable, Responder
from gslbd.wire.compile import Node

SERVICES = 40
EAGER = 20  # names: a view of 40 services (80 names and more) is compiled in steps


def fleet() -> Config:
    lines = [
        "version: 1",
        "zones:",
        "  - origin: gslb.example.com.",
        "    nameservers: [{name: ns1.gslb.example.com., address: 192.0.2.53}]",
        "services:",
    ]
    for i in range(SERVICES):
        policy = (
            "weighted\n    weight_from: load"
            if i % 2
            else "round_robin\n    shed_load: {low: 0.5, high: 0.9}"
        )
        lines += [
            f"  - name: s{i}.gslb.example.com.",
            f"    policy: {policy}",
            '    load: {url: "http://{address}:9100/load", every: 5s}',
            "    endpoints:",
            f"      - {{address: 10.0.{i}.1}}",
            f"      - {{address: 10.0.{i}.2}}",
        ]
    return load_config_text("\n".join(lines) + "\n")


CONFIG = fleet()
ENV = build_env(CONFIG, random.Random(1))


def report(book: HealthBook, services: range, figure: float, now: float) -> None:
    """Every endpoint of `services` reports `figure` at `now` (through the pure core, as the app does)."""
    for i in services:
        for endpoint in CONFIG.services[i].endpoints:
            assert endpoint.load is not None
            before = book.load(endpoint.key) or NO_LOAD
            book.set_load(endpoint.key, observe(before, figure, now, endpoint.load, None))


def whole(builder: AnswerBuilder) -> AnswerTable:
    """The builder's table once `fill` has compiled every name."""
    while builder.fill(1.0) is not None:
        pass
    assert builder.table is not None and not builder.table.partial
    return builder.table


def answers(node: Node) -> tuple[object, ...]:
    """What a node answers: per type (and the default) the variants' bytes and the plan that picks."""
    entries = [*sorted(node.types.items()), (-1, node.default)]
    return tuple(
        (code, repr(getattr(e.pick, "__self__", e.pick)), e.variants, e.location_dependent)  # weights
        for code, e in entries
    )


def test_a_fleet_wide_load_change_updates_the_whole_table_to_the_answers_of_a_fresh_build() -> None:
    book = HealthBook()
    report(book, range(SERVICES), 0.3, 5.0)
    builder = AnswerBuilder(eager_names=EAGER)
    builder.build(CONFIG, book.snapshot(), ENV)
    book.take_touched()
    old = whole(builder)

    report(book, range(SERVICES), 0.6, 10.0)
    snapshot, touched = book.snapshot(), book.take_touched()
    _, updated = builder.build(CONFIG, snapshot, ENV, touched)
    assert len(builder.last_change.services) == SERVICES and not builder.last_change.full
    assert updated.derived_from == old.serial and not updated.partial
    assert builder.fill(1.0) is None  # nothing was left out: no name goes to the slow path

    fresh = AnswerBuilder(eager_names=EAGER)
    fresh.build(CONFIG, snapshot, ENV)
    rebuilt = whole(fresh)
    assert rebuilt.names.keys() == updated.names.keys()
    assert len(updated.names) > SERVICES
    moved = 0
    for key, node in updated.names.items():
        assert answers(rebuilt.names[key]) == answers(node), key
        moved += answers(old.names[key]) != answers(node)
    assert moved >= SERVICES // 2  # every weighted service (weight_from: load) got new weights
    assert rebuilt.policy_counters.keys() == updated.policy_counters.keys()


def test_the_answer_counters_carry_on_across_a_fleet_wide_update() -> None:
    book = HealthBook()
    report(book, range(SERVICES), 0.3, 5.0)
    builder = AnswerBuilder(eager_names=EAGER)
    view, _ = builder.build(CONFIG, book.snapshot(), ENV)
    book.take_touched()
    table = whole(builder)
    assert builder.view is not None
    responder = Responder(table, builder.view, random.Random(3), native=False)
    queries = [dns.message.make_query(f"s{i}.gslb.example.com.", "A").to_wire() for i in range(SERVICES)]
    for wire in queries:
        assert responder.handle(wire, 0x0A000001, False) is not None
    counted = responder.policy_answers()
    assert sum(counted.values()) == SERVICES

    report(book, range(SERVICES), 0.6, 10.0)
    view, updated = builder.build(CONFIG, book.snapshot(), ENV, book.take_touched())
    responder.swap(updated, view)
    assert responder.policy_answers() == counted
    for wire in queries:
        responder.handle(wire, 0x0A000001, False)
    assert sum(responder.policy_answers().values()) == 2 * SERVICES
