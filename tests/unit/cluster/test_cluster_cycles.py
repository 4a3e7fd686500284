"""Aligned cycles and the ledger that feeds at most one raw result per endpoint and cycle."""

from __future__ import annotations

import math

import pytest

from gslbd.cluster.cycles import Ledger, cycle_of, cycle_offset, cycle_start, until_next_cycle

KEY = ("app.gslb.example.com.", "192.0.2.10")
OTHER = ("app.gslb.example.com.", "192.0.2.11")


def test_the_offset_is_the_same_in_every_process_and_spreads_endpoints_over_the_interval() -> None:
    # A fixed value: instances on other hosts (and other Python processes) compute the same one.
    assert cycle_offset(KEY, 10.0) == pytest.approx(cycle_offset(KEY, 1.0) * 10)
    assert 0 <= cycle_offset(KEY, 5.0) < 5.0
    offsets = [cycle_offset(("svc.example.", f"10.0.{i // 256}.{i % 256}"), 1.0) for i in range(1000)]
    tenths = [sum(1 for o in offsets if k / 10 <= o < (k + 1) / 10) for k in range(10)]
    assert min(tenths) > 60  # about 100 per tenth of the interval


def test_cycle_offset_value_is_stable() -> None:
    assert cycle_offset(KEY, 1.0) == pytest.approx(_blake_fraction(), abs=1e-12)


def _blake_fraction() -> float:
    import hashlib

    digest = hashlib.blake2b(b"app.gslb.example.com.|192.0.2.10", digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def test_a_cycle_begins_a_quarter_interval_before_its_nominal_start() -> None:
    interval, offset = 4.0, 1.0
    assert cycle_start(10, interval, offset) == 41.0
    assert cycle_of(41.0, interval, offset) == 10
    assert cycle_of(40.0, interval, offset) == 10  # 1 s early = a quarter interval: still cycle 10
    assert cycle_of(39.99, interval, offset) == 9
    assert cycle_of(43.99, interval, offset) == 10
    assert cycle_of(44.0, interval, offset) == 11


def test_the_next_cycle_is_never_the_current_one() -> None:
    interval, offset = 1.0, 0.3
    assert until_next_cycle(10.3, interval, offset) == pytest.approx(1.0)  # at a start: the next one
    assert until_next_cycle(10.29, interval, offset) == pytest.approx(1.01)  # woke 10 ms early
    assert until_next_cycle(10.8, interval, offset) == pytest.approx(0.5)
    assert until_next_cycle(11.0, interval, offset) == pytest.approx(0.3)
    # 0.2 s before a start is within that cycle's early quarter: it counts as that cycle.
    assert until_next_cycle(11.1, interval, offset) == pytest.approx(1.2)


def test_one_result_per_cycle_is_fed_whatever_its_source() -> None:
    ledger = Ledger()
    ledger.track(KEY, 1.0)
    start = cycle_start(100, 1.0, cycle_offset(KEY, 1.0))
    assert ledger.claim(KEY, start + 0.002) is True  # the message of cycle 100
    assert ledger.claim(KEY, start + 0.001) is False  # the same result read from the key
    assert ledger.claim(KEY, start + 0.7) is False  # still cycle 100
    assert ledger.claim(KEY, start + 1.003) is True  # cycle 101
    assert ledger.claim(KEY, start + 0.5) is False  # an older cycle's result arriving late
    assert ledger.newest(KEY) == pytest.approx(start + 1.003)


def test_results_for_endpoints_not_followed_are_not_fed() -> None:
    ledger = Ledger()
    ledger.track(KEY, 1.0)
    assert ledger.claim(OTHER, 5.0) is False
    assert ledger.delay(OTHER, 5.0) is None
    ledger.retain(set())
    assert KEY not in ledger
    assert ledger.claim(KEY, 5.0) is False


def test_a_changed_interval_starts_the_endpoint_afresh() -> None:
    ledger = Ledger()
    ledger.track(KEY, 1.0)
    assert ledger.claim(KEY, 50.0)
    ledger.track(KEY, 1.0)
    assert not ledger.claim(KEY, 50.0)  # unchanged: remembers the cycle
    ledger.track(KEY, 2.0)
    assert ledger.newest(KEY) is None
    assert ledger.claim(KEY, 50.0)


def test_when_the_key_was_written_comes_from_its_remaining_ttl() -> None:
    ledger = Ledger()
    ledger.track(KEY, 5.0)  # health TTL 10 s
    assert ledger.written_at(KEY, 100.0, 9_750) == pytest.approx(99.75)
    assert ledger.written_at(KEY, 100.0, -1) == 100.0  # no TTL: taken as written now


def test_our_own_publication_is_recognized_once_when_it_comes_back() -> None:
    ledger = Ledger()
    ledger.track(KEY, 1.0)
    ledger.published(KEY, False, 10.0)
    assert not ledger.is_echo(KEY, True, 10.001)  # another result
    assert ledger.is_echo(KEY, False, 10.002)
    assert not ledger.is_echo(KEY, False, 10.003)  # once only
    ledger.published(KEY, True, 20.0)
    assert not ledger.is_echo(KEY, True, 20.6)  # more than half an interval later: someone else's
    ledger.published(KEY, True, 30.0)
    ledger.forget_echoes()
    assert not ledger.is_echo(KEY, True, 30.001)
    ledger.published(KEY, True, 40.0)
    ledger.unpublished(KEY)
    assert not ledger.is_echo(KEY, True, 40.001)


def test_delay_places_every_cycle_on_the_shared_grid() -> None:
    ledger = Ledger()
    ledger.track(KEY, 2.0)
    offset = cycle_offset(KEY, 2.0)
    wall = 1_700_000_000.0
    delay = ledger.delay(KEY, wall)
    assert delay is not None
    assert 0 < delay <= 2.0 * 1.25
    assert math.isclose(((wall + delay - offset) / 2.0) % 1, 0.0, abs_tol=1e-6) or math.isclose(
        ((wall + delay - offset) / 2.0) % 1, 1.0, abs_tol=1e-6
    )
