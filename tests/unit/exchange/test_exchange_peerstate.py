"""The per-peer state machine and the peer book, driven by a fake clock: fresh, failing, stale, the
threshold, replacement of a view, heartbeats, and the endpoints a peer adds to this site."""

from __future__ import annotations

import logging

import pytest
from exchange_support import APP, config

from gslbd.clock import FakeClock
from gslbd.exchange import Freshness, PeerAnswer, PeerBook, PeerState, learned_endpoints
from gslbd.exchange.peerstate import evaluate, on_answer, on_failure
from gslbd.model.topology import Locality
from gslbd.types import EndpointKind

STALE_AFTER = 30.0
WEB = "web.gslb.test."


def answer(targets: dict[str, tuple[str, ...]], heartbeat: float | None = None) -> PeerAnswer:
    return PeerAnswer(targets, heartbeat, "127.0.0.9:5300")


def test_a_peer_that_never_answered_is_stale_and_counts_nothing() -> None:
    state = evaluate(PeerState("us"), 1000.0, 1.7e9, STALE_AFTER)
    assert (state.freshness, state.detail, dict(state.usable)) == (Freshness.STALE, "no answer yet", {})


def test_an_answer_makes_the_peer_fresh_with_its_view() -> None:
    state = on_answer(PeerState("us"), answer({APP: ("198.51.100.1",)}), 1000.0, 1.7e9, STALE_AFTER)
    assert state.freshness is Freshness.FRESH
    assert dict(state.usable) == {APP: ("198.51.100.1",)}
    assert (state.last_answer, state.last_answer_wall, state.polls, state.endpoint_count) == (
        1000.0,
        1.7e9,
        1,
        1,
    )


def test_a_new_answer_replaces_the_whole_previous_view() -> None:
    first = on_answer(PeerState("us"), answer({APP: ("198.51.100.1",), WEB: ("198.51.100.2",)}), 1000, 0, 30)
    second = on_answer(first, answer({APP: ("198.51.100.9",)}), 1005, 0, 30)
    assert dict(second.usable) == {APP: ("198.51.100.9",)}  # web is gone: the peer has none now


def test_a_failed_poll_keeps_the_last_view_until_stale_after_then_counts_nothing() -> None:
    fresh = on_answer(PeerState("us"), answer({APP: ("198.51.100.1",)}), 1000.0, 0.0, STALE_AFTER)
    failing = on_failure(fresh, "timeout", 2, 1005.0, 5.0, STALE_AFTER)
    assert failing.freshness is Freshness.FRESH and failing.failing
    assert dict(failing.usable) == {APP: ("198.51.100.1",)}
    assert failing.detail == "last poll failed: timeout; keeping the view of 5s ago"
    assert failing.errors == 2
    at_threshold = on_failure(failing, "timeout", 1, 1030.0, 30.0, STALE_AFTER)
    assert at_threshold.freshness is Freshness.FRESH  # exactly stale_after: still trusted
    beyond = on_failure(at_threshold, "timeout", 1, 1030.5, 30.5, STALE_AFTER)
    assert beyond.freshness is Freshness.STALE
    assert beyond.detail == "no answer for 30s (stale_after 30s): timeout"
    assert dict(beyond.usable) == {}
    assert dict(beyond.targets) == {APP: ("198.51.100.1",)}  # kept, but not counted
    assert beyond.errors == 4


def test_a_stale_peer_that_answers_again_is_fresh_with_the_new_view() -> None:
    fresh = on_answer(PeerState("us"), answer({APP: ("198.51.100.1",)}), 1000.0, 0.0, STALE_AFTER)
    stale = evaluate(fresh, 1100.0, 100.0, STALE_AFTER)
    back = on_answer(stale, answer({APP: ("198.51.100.2",)}), 1101.0, 101.0, STALE_AFTER)
    assert (stale.freshness, back.freshness) == (Freshness.STALE, Freshness.FRESH)
    assert dict(back.usable) == {APP: ("198.51.100.2",)}
    assert not back.failing and back.detail == ""


def test_a_heartbeat_older_than_stale_after_makes_an_answering_peer_stale() -> None:
    wall = 1_700_000_000.0
    ok = on_answer(PeerState("us"), answer({APP: ("198.51.100.1",)}, wall - 30), 1000, wall, STALE_AFTER)
    old = on_answer(PeerState("us"), answer({APP: ("198.51.100.1",)}, wall - 31), 1000, wall, STALE_AFTER)
    assert ok.freshness is Freshness.FRESH
    assert (old.freshness, old.detail) == (Freshness.STALE, "its heartbeat is 31s old (stale_after 30s)")
    assert dict(old.usable) == {}


def test_a_peer_without_a_heartbeat_is_judged_by_its_answers_alone() -> None:
    state = on_answer(PeerState("us"), answer({APP: ("198.51.100.1",)}, None), 1000, 1e9, STALE_AFTER)
    assert state.freshness is Freshness.FRESH


# -- the book ------------------------------------------------------------------------------------


def test_published_addresses_become_endpoints_of_the_peer_site() -> None:
    cfg = config()
    clock = FakeClock()
    book = PeerBook(cfg, clock)
    assert book.answer("ap", answer({APP: ("203.0.113.1", "203.0.113.7", "2001:db8::7")}))
    (configured, new_v4, new_v6) = book.endpoints()[APP]
    # The configured endpoint of ap is used as configured; unknown addresses get ap's locality.
    assert configured == next(e for e in cfg.services[0].endpoints if e.address == "203.0.113.1")
    assert (new_v4.address, new_v4.site, new_v4.kind, new_v4.locality) == (
        "203.0.113.7",
        "ap",
        EndpointKind.IPV4,
        Locality("asia"),
    )
    assert (new_v4.weight, new_v4.priority, new_v4.check) == (1, 0, None)
    assert (new_v6.address, new_v6.kind) == ("2001:db8::7", EndpointKind.IPV6)


def test_configured_endpoint_keeps_weight_and_priority_when_its_site_publishes_it() -> None:
    cfg = config()
    book = PeerBook(cfg, FakeClock())
    book.answer("us", answer({APP: ("198.51.100.1",)}))
    (us,) = book.endpoints()[APP]
    assert (us.site, us.weight, us.priority) == ("us", 5, 1)


def test_an_address_this_site_owns_is_never_taken_from_a_peer() -> None:
    book = PeerBook(config(), FakeClock())
    assert not book.answer("us", answer({APP: ("192.0.2.1",)}))  # eu's own endpoint
    assert dict(book.endpoints()) == {}


def test_an_address_published_by_two_peers_is_learned_once_from_the_first_in_config_order() -> None:
    book = PeerBook(config(), FakeClock())
    book.answer("ap", answer({APP: ("203.0.113.50",)}))
    book.answer("us", answer({APP: ("203.0.113.50",)}))
    assert [(e.address, e.site) for e in book.endpoints()[APP]] == [("203.0.113.50", "us")]


def test_learned_endpoints_change_only_when_a_view_that_counts_changes() -> None:
    clock = FakeClock()
    book = PeerBook(config(), clock)
    assert book.answer("us", answer({APP: ("198.51.100.1",)}))
    clock.advance(5)
    assert not book.answer("us", answer({APP: ("198.51.100.1",)}))  # same view
    clock.advance(5)
    assert not book.failure("us", "timeout")  # failing, still fresh
    assert [e.address for e in book.endpoints()[APP]] == ["198.51.100.1"]


def test_stale_threshold_removes_a_silent_peers_endpoints_and_an_answer_brings_them_back() -> None:
    clock = FakeClock()
    book = PeerBook(config(), clock)
    book.answer("us", answer({APP: ("198.51.100.1",)}))
    clock.advance(30)
    assert not book.failure("us", "timeout")
    assert APP in book.endpoints()
    clock.advance(0.5)
    assert book.evaluate()  # 30.5 s after the last answer: stale
    assert dict(book.endpoints()) == {}
    state = book.state("us")
    assert state is not None and state.freshness is Freshness.STALE
    clock.advance(1)
    assert book.answer("us", answer({APP: ("198.51.100.1",)}))
    assert [e.address for e in book.endpoints()[APP]] == ["198.51.100.1"]


def test_state_changes_are_logged_once_not_per_poll(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    book = PeerBook(config(), clock)
    caplog.set_level(logging.INFO, logger="gslbd.exchange.peerbook")
    book.answer("us", answer({APP: ("198.51.100.1",)}))
    for _ in range(10):
        clock.advance(5)
        book.failure("us", "timeout after 1s")
    clock.advance(5)
    book.answer("us", answer({APP: ("198.51.100.1",)}))
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "peer us is fresh: 1 endpoint addresses learned",
        "peer us does not answer (timeout after 1s); its last view counts until 30s after its last answer",
        "peer us is stale: no answer for 35s (stale_after 30s): timeout after 1s; "
        "its endpoints no longer count",
        "peer us answers again",
        "peer us is fresh: 1 endpoint addresses learned",
    ]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2


def test_reconfiguring_keeps_remaining_peers_and_forgets_removed_ones() -> None:
    clock = FakeClock()
    book = PeerBook(config(), clock)
    book.answer("us", answer({APP: ("198.51.100.1",)}))
    book.answer("ap", answer({APP: ("203.0.113.1",)}))
    only_us = '  sites:\n    - {name: us, nameservers: ["127.0.0.9:5300"]}\n'
    assert book.configure(config(peers=only_us))
    assert [s.name for s in book.states()] == ["us"]
    assert [e.address for e in book.endpoints()[APP]] == ["198.51.100.1"]


def test_learned_endpoints_ignore_services_this_site_does_not_have() -> None:
    cfg = config()
    state = on_answer(PeerState("us"), answer({"other.gslb.test.": ("198.51.100.1",)}), 0, 0, 30)
    assert learned_endpoints(cfg, {"us": state}) == {}
