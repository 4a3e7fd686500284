"""The health book: verdicts and admin overrides in, numbered snapshots out."""

from __future__ import annotations

from gslbd.state.book import HealthBook
from gslbd.state.status import EndpointStatus
from gslbd.types import AdminState

A = ("app.gslb.example.com.", "192.0.2.1")
B = ("app.gslb.example.com.", "192.0.2.2")


def test_record_says_whether_the_verdict_changed() -> None:
    book = HealthBook()
    assert book.record(A, EndpointStatus(healthy=True, successes=1)) is True  # unknown -> up
    assert book.record(A, EndpointStatus(healthy=True, successes=2)) is False  # streak only
    assert book.record(A, EndpointStatus(healthy=True, failures=1)) is False
    assert book.record(A, EndpointStatus(healthy=False, failures=3)) is True
    assert book.status(A) == EndpointStatus(healthy=False, failures=3)
    assert book.status(B) == EndpointStatus()
    assert book.known(B) is None


def test_snapshot_holds_verdicts_only_and_counts_up() -> None:
    book = HealthBook()
    book.record(A, EndpointStatus(healthy=False, failures=3))
    book.record(B, EndpointStatus(failures=1))  # a failure but no verdict yet
    first = book.snapshot()
    second = book.snapshot()
    assert (first.version, second.version) == (1, 2)
    assert dict(first.health) == {A: False}
    assert dict(first.admin) == {}


def test_admin_overrides_go_into_every_next_snapshot_and_earlier_ones_stay_unchanged() -> None:
    book = HealthBook({A: AdminState.DOWN})
    before = book.snapshot()
    assert book.set_admin(B, AdminState.UP) is True
    assert book.set_admin(B, AdminState.UP) is False
    assert book.set_admin(A, AdminState.OBEY) is True
    after = book.snapshot()
    assert dict(before.admin) == {A: AdminState.DOWN}
    assert dict(after.admin) == {A: AdminState.OBEY, B: AdminState.UP}


def test_retain_forgets_the_health_of_other_endpoints() -> None:
    book = HealthBook()
    book.record(A, EndpointStatus(healthy=False))
    book.record(B, EndpointStatus(healthy=True))
    book.retain({B})
    assert book.known(A) is None
    assert dict(book.snapshot().health) == {B: True}
