"""The per-policy answer counters behind the gslbd_dns_policy_answers_total metric."""

from __future__ import annotations

from wire_support import ORIGIN, ask_wire, make_responder, make_view, query


def test_each_policy_answer_is_counted_once_and_static_answers_are_not() -> None:
    responder = make_responder()
    for _ in range(3):
        ask_wire(responder, query(f"app.{ORIGIN}", "A"))
    ask_wire(responder, query(f"solo.{ORIGIN}", "A"))  # one candidate: still decided by round_robin
    ask_wire(responder, query(f"split.{ORIGIN}", "A"))
    ask_wire(responder, query(f"primary.{ORIGIN}", "A"))
    ask_wire(responder, query(f"nope.{ORIGIN}", "A"))  # NXDOMAIN: no policy involved
    ask_wire(responder, query(ORIGIN, "SOA"))  # static: no policy involved
    counts = responder.policy_answers()
    assert counts["round_robin"] == 4
    assert counts["weighted"] == 1
    assert counts["failover"] == 1
    assert counts.get("geo", 0) == 0


def test_counts_survive_a_table_swap() -> None:
    responder = make_responder()
    ask_wire(responder, query(f"app.{ORIGIN}", "A"))
    ask_wire(responder, query(f"app.{ORIGIN}", "AAAA"))
    fresh = make_responder()
    responder.swap(fresh.table, make_view())
    ask_wire(responder, query(f"app.{ORIGIN}", "A"))
    assert responder.policy_answers()["round_robin"] == 3
