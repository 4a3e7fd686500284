"""The exchange zone's content and journal (exchange/zone.py): serials, condensed differences, limits; and
the peer book's merge of a poll that changed a few services (what an IXFR brings)."""

from __future__ import annotations

import ipaddress

import pytest
from exchange_support import config

from gslbd.clock import FakeClock
from gslbd.errors import ConfigError
from gslbd.exchange.peerbook import PeerBook, learned_endpoints
from gslbd.exchange.peerstate import PeerAnswer
from gslbd.exchange.zone import (
    AAAA,
    SERIAL_MODULO,
    SLACK,
    A,
    ZoneJournal,
    content_of,
    label_of,
    next_serial,
    record_diff,
    rrsets_of,
)

T0 = 1_700_000_000.0


def v4(text: str) -> bytes:
    return ipaddress.IPv4Address(text).packed


def test_content_holds_one_rrset_per_label_and_family_with_the_service_ttl() -> None:
    names = {"localtargets-app.gslb.test.": ("192.0.2.2", "192.0.2.1", "2001:db8::1")}
    content = content_of("gslb.test.", names, {"localtargets-app.gslb.test.": 30})
    assert content == {
        ("app", A): (30, (v4("192.0.2.1"), v4("192.0.2.2"))),
        ("app", AAAA): (30, (ipaddress.IPv6Address("2001:db8::1").packed,)),
    }
    assert label_of("localtargets-a.b.gslb.test.", "gslb.test.") == "a.b"
    assert label_of("heartbeat-eu.gslb.test.", "gslb.test.") is None


def test_the_serial_starts_at_the_clock_in_tenths_and_moves_on_with_each_change() -> None:
    journal = ZoneJournal({}, T0, 10)
    assert journal.serial == int(T0 * 10) % SERIAL_MODULO
    assert journal.update(rrsets_of("app", ("192.0.2.1",), 30), T0)  # same tenth: one more
    assert journal.serial == int(T0 * 10) % SERIAL_MODULO + 1
    assert journal.update({("app", A): None}, T0 + 60)  # later: the clock
    assert journal.serial == int((T0 + 60) * 10) % SERIAL_MODULO
    assert not journal.update({("app", A): None}, T0 + 61)  # nothing changed: no new serial
    assert next_serial(SERIAL_MODULO - 1, 0.0) == 0  # wraps (RFC 1982)


def test_since_condenses_the_steps_and_drops_changes_that_cancel_out() -> None:
    journal = ZoneJournal(rrsets_of("app", ("192.0.2.1",), 30), T0, 10)
    start = journal.serial
    journal.update(rrsets_of("app", ("192.0.2.1", "192.0.2.2"), 30), T0)
    journal.update(rrsets_of("web", ("192.0.2.9",), 30), T0)
    journal.update({("web", A): None}, T0)
    assert journal.since(start) == {
        ("app", A): ((30, (v4("192.0.2.1"),)), (30, (v4("192.0.2.1"), v4("192.0.2.2"))))
    }
    assert journal.since(journal.serial) == {}
    assert journal.since(12345) is None


@pytest.mark.parametrize(("limit", "reaches"), [(3, True), (2, False)])
def test_the_journal_keeps_at_most_limit_steps(limit: int, reaches: bool) -> None:
    journal = ZoneJournal(
        {**rrsets_of("a", ("192.0.2.1",), 5), **rrsets_of("b", ("192.0.2.2",), 5)}, T0, limit
    )
    start = journal.serial
    for n in range(3):
        journal.update(rrsets_of("a", (f"192.0.2.{10 + n}",), 5), T0)
    assert (journal.since(start) is not None) is reaches


def test_steps_holding_more_than_the_zone_and_the_slack_are_dropped() -> None:
    journal = ZoneJournal(rrsets_of("a", ("192.0.2.1",), 5), T0, 10_000)
    start = journal.serial
    for n in range(SLACK + 1):  # one changed RRset each; the zone has one
        journal.update(rrsets_of("a", (str(ipaddress.IPv4Address(0x0A000000 + n)),), 5), T0)
    assert journal.since(start) is not None
    journal.update(rrsets_of("a", ("192.0.2.3",), 5), T0)
    assert journal.since(start) is None


def test_record_diff_deletes_and_adds_only_what_changed() -> None:
    old = (30, (v4("192.0.2.1"), v4("192.0.2.2")))
    new = (30, (v4("192.0.2.2"), v4("192.0.2.3")))
    assert record_diff((old, new)) == ([(30, v4("192.0.2.1"))], [(30, v4("192.0.2.3"))])
    assert record_diff((None, new)) == ([], [(30, v4("192.0.2.2")), (30, v4("192.0.2.3"))])
    retimed = (60, old[1])
    assert record_diff((old, retimed)) == ([(30, r) for r in old[1]], [(60, r) for r in old[1]])


def test_the_exchange_zone_names_are_reserved_in_the_configuration() -> None:
    with pytest.raises(ConfigError) as refused:
        config(services="  - name: _gslbd-exchange-x\n    endpoints: [{address: 192.0.2.1, site: eu}]\n")
    assert "'_gslbd-exchange-' are reserved for the exchange" in str(refused.value), str(refused.value)


def test_a_poll_that_changes_a_few_services_updates_just_those_and_agrees_with_a_full_merge() -> None:
    services = "".join(
        f"  - name: s{n}\n    endpoints: [{{address: 192.0.2.{n + 1}, site: eu}}, "
        f"{{address: 198.51.100.{n + 1}, site: us}}]\n"
        for n in range(20)
    )
    cfg = config(services=services)
    book = PeerBook(cfg, FakeClock())
    us = {f"s{n}.gslb.test.": (f"198.51.100.{n + 1}",) for n in range(20)}
    ap = {"s3.gslb.test.": ("203.0.113.3", "198.51.100.9")}  # s3: an address us publishes for s8
    assert book.answer("us", PeerAnswer(us)) and book.answer("ap", PeerAnswer(ap))
    first = book.endpoints()
    changed = {**us, "s3.gslb.test.": ("198.51.100.9",), "s5.gslb.test.": ("198.51.100.6", "198.51.100.77")}
    del changed["s7.gslb.test."]
    assert book.answer("us", PeerAnswer(changed))
    states = {s.name: s for s in book.states()}
    assert dict(book.endpoints()) == learned_endpoints(cfg, states)
    assert [e.address for e in book.endpoints()["s3.gslb.test."]] == ["198.51.100.9", "203.0.113.3"]
    assert "s7.gslb.test." not in book.endpoints()
    assert book.endpoints()["s9.gslb.test."] is first["s9.gslb.test."]  # untouched services are not rebuilt
    assert not book.answer("us", PeerAnswer(changed))  # the same view again: nothing changed
