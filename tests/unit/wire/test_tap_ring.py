"""The C dnstap ring (`_cfast.TapRing`, wire/_tap.c) the C UDP loops write and the dnstap writer drains:
first in, first out across the buffer's wrap-around, bounded in entries and in bytes, a full ring drops the
new entry and counts it."""

from __future__ import annotations

import random
from collections import deque

import pytest

from gslbd.wire import ctable as ct

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

if ct.AVAILABLE:
    from gslbd.wire import _cfast

Entry = tuple[bytes, bytes | None, int, bool, bool, int, int]


def test_entries_come_out_as_they_went_in_with_both_families_and_no_response() -> None:
    ring = _cfast.TapRing(4, 4096, True, True)
    v6 = 0x20010DB8 << 96 | 1
    assert ring.put(b"q1", b"r1", 0x7F000001, False, False, 10, 20)
    assert ring.put(b"q2", None, v6, True, True, 30, 40)
    assert len(ring) == 2
    assert ring.drain(10) == [
        (b"q1", b"r1", 0x7F000001, False, False, 10, 20),
        (b"q2", None, v6, True, True, 30, 40),
    ]
    assert (len(ring), ring.counts()) == (0, (0, 0))


def test_a_full_ring_drops_the_new_entry_and_counts_it_by_entries_and_by_bytes() -> None:
    ring = _cfast.TapRing(2, 4096, True, True)
    assert [ring.put(b"q", b"r", 1, False, False, 1, 2) for _ in range(3)] == [True, True, False]
    assert ring.counts() == (2, 1)
    roomy = _cfast.TapRing(100, 4096, True, True)
    assert not roomy.put(b"q" * 2000, b"r" * 2100, 1, False, False, 1, 2)  # more bytes than the ring holds
    assert roomy.put(b"q" * 1000, b"r" * 1000, 1, False, False, 1, 2)
    assert not roomy.put(b"q" * 1000, b"r" * 1100, 1, False, False, 1, 2)  # no room left behind the first
    assert roomy.counts() == (1, 2)


def test_what_the_writer_does_not_encode_is_not_kept() -> None:
    responses_only = _cfast.TapRing(10, 4096, False, True)
    assert responses_only.put(b"query", None, 1, False, False, 1, 2)  # nothing to log: not stored
    assert responses_only.put(b"query", b"reply", 1, False, False, 1, 2)
    assert responses_only.drain(10) == [(b"", b"reply", 1, False, False, 1, 2)]
    queries_only = _cfast.TapRing(10, 4096, True, False)
    assert queries_only.put(b"query", b"reply", 1, False, False, 1, 2)
    assert queries_only.drain(10) == [(b"query", None, 1, False, False, 1, 2)]


def test_it_is_a_bounded_fifo_across_wrap_arounds_like_a_deque() -> None:
    rng = random.Random(7)
    ring = _cfast.TapRing(40, 8192, True, True)
    model: deque[Entry] = deque()
    dropped = 0
    for step in range(30_000):
        if rng.random() < 0.55:
            query = rng.randbytes(rng.randint(0, 700))
            response = rng.choice([None, rng.randbytes(rng.randint(0, 900))])
            entry = (query, response, step, False, False, step, step + 1)
            if ring.put(*entry):
                model.append(entry)
            else:
                dropped += 1
        else:
            n = rng.randint(0, 7)
            assert ring.drain(n) == [model.popleft() for _ in range(min(n, len(model)))]
        assert ring.counts() == (len(model), dropped)
    assert dropped > 50  # the bounds were reached many times


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        _cfast.TapRing(0, 4096, True, True)
    with pytest.raises(ValueError):
        _cfast.TapRing(10, 100, True, True)
    with pytest.raises(TypeError):
        _cfast.UdpLoop(0, _cfast.Slot(), print, None, 1, None, object())  # type: ignore[arg-type]
