"""A build that rebuilt more than FULL_SHARE of the services compiles the table anew (server/build.py):
the table it ends with (once `fill` has compiled what it left out) answers every name exactly as the
table updated name by name does, and the answer counters carry on across it."""

from __future__ import annotations

import random

import dns.message

from gslbd.config import load_config_text
from gslbd.model.config import Config
from gslbd.policy.load import NO_LOAD, observe
from gslbd.policy.locate import build_env
from gslbd.server.build import FULL_SHARE, AnswerBuilder
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
    """What a node answers: per type (and the default) the variants' bytes and whether a plan picks."""
    entries = [*sorted(node.types.items()), (-1, node.default)]
    return tuple((code, e.pick is None, e.variants, e.location_dependent) for code, e in entries)


def test_a_fleet_wide_load_change_compiles_the_table_anew_with_the_same_answers_as_an_update() -> None:
    book = HealthBook()
    report(book, range(SERVICES), 0.3, 5.0)
    snapshot = book.snapshot()
    book.take_touched()
    updating = AnswerBuilder(eager_names=EAGER, full_share=1.0)  # never compiles anew: name by name
    falling = AnswerBuilder(eager_names=EAGER)
    for builder in (updating, falling):
        builder.build(CONFIG, snapshot, ENV)
        whole(builder)

    # A change at a share of the services below the threshold: both update the table.
    few = max(1, int(SERVICES * FULL_SHARE) - 1)
    report(book, range(few), 0.7, 10.0)
    snapshot, touched = book.snapshot(), book.take_touched()
    for builder in (updating, falling):
        before = builder.table
        assert before is not None
        _, table = builder.build(CONFIG, snapshot, ENV, touched)
        assert len(builder.last_change.services) == few
        assert table.derived_from == before.serial and not table.partial

    # Above it: the falling builder compiles anew (and leaves the services' names to `fill`).
    report(book, range(SERVICES), 0.6, 15.0)
    snapshot, touched = book.snapshot(), book.take_touched()
    old = updating.table
    assert old is not None
    _, updated = updating.build(CONFIG, snapshot, ENV, touched)
    assert updated.derived_from == old.serial
    _, anew = falling.build(CONFIG, snapshot, ENV, touched)
    assert len(falling.last_change.services) == SERVICES > FULL_SHARE * SERVICES
    assert not falling.last_change.full  # the view's change is what it was: every service, incrementally
    assert anew.derived_from == 0 and anew.partial
    filled = whole(falling)
    assert filled.names.keys() == updated.names.keys()
    assert len(updated.names) > SERVICES
    for key, node in updated.names.items():
        assert answers(filled.names[key]) == answers(node), key
    assert filled.policy_counters.keys() == updated.policy_counters.keys()


def test_the_answer_counters_carry_on_across_a_table_compiled_anew() -> None:
    book = HealthBook()
    report(book, range(SERVICES), 0.3, 5.0)
    builder = AnswerBuilder(eager_names=EAGER)
    view, _ = builder.build(CONFIG, book.snapshot(), ENV)
    book.take_touched()
    table = whole(builder)
    responder = Responder(table, view, random.Random(3), native=False)
    queries = [dns.message.make_query(f"s{i}.gslb.example.com.", "A").to_wire() for i in range(SERVICES)]
    for wire in queries:
        assert responder.handle(wire, 0x0A000001, False) is not None
    counted = responder.policy_answers()
    assert sum(counted.values()) == SERVICES

    report(book, range(SERVICES), 0.6, 10.0)
    view, anew = builder.build(CONFIG, book.snapshot(), ENV, book.take_touched())
    assert anew.derived_from == 0
    responder.swap(anew, view)
    assert responder.policy_answers() == counted
    filled = whole(builder)
    assert builder.view is not None
    responder.swap(filled, builder.view, lag=True)
    assert responder.policy_answers() == counted
    for wire in queries:
        responder.handle(wire, 0x0A000001, False)
    assert sum(responder.policy_answers().values()) == 2 * SERVICES
