"""Peer events carry structured fields (`event: peer`, the peer, its new state) for JSON logs."""

from __future__ import annotations

import logging

import pytest
from exchange_support import APP, config

from gslbd.clock import FakeClock
from gslbd.exchange import PeerAnswer, PeerBook


def test_peer_state_changes_carry_event_peer_and_state(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    book = PeerBook(config(), clock)
    caplog.set_level(logging.INFO, logger="gslbd.exchange.peerbook")
    book.answer("us", PeerAnswer(targets={APP: ("198.51.100.1",)}))
    for _ in range(8):
        clock.advance(5)
        book.failure("us", "timeout after 1s")
    fields = [
        (r.__dict__.get("event"), r.__dict__.get("peer"), r.__dict__.get("state")) for r in caplog.records
    ]
    assert fields == [("peer", "us", "fresh"), ("peer", "us", "failing"), ("peer", "us", "stale")]
    assert caplog.records[0].__dict__["endpoints"] == 1
    assert caplog.records[1].__dict__["error"] == "timeout after 1s"
    assert caplog.records[2].__dict__["detail"].startswith("no answer for")
