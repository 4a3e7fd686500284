"""Endpoints with several checks (`endpoints[].checks`, `health: all|any`) in the running instance.

Each check of such an endpoint is probed as a unit of its own (app/reconcile.py `check_units`, keyed
`(service, "<address>#<check>")`: its own probe loop, push deadline, cluster lock and Redis health key)
and has its own verdict machine; the book keeps each unit's status (`HealthBook.record_check`) and the
endpoint's combined verdict (`HealthBook.record`), which is what the answers read:

    unit result -> fsm.step -> book.record_check(unit key) -> combined(book, unit, now)
                -> book.record(endpoint key)   (app/core.py App._on_result)

`recombine` combines every such endpoint again after its units were seeded (a start, a reload), and
`CheckGauges` keeps gslbd_endpoint_check_up{service,address,check} in step.
"""

from __future__ import annotations

from collections.abc import Mapping

from gslbd.health.combine import check_up, combine
from gslbd.metrics import ENDPOINT_CHECK_UP
from gslbd.model.service import Endpoint, EndpointKey, unit_key
from gslbd.state.book import HealthBook
from gslbd.state.status import EndpointStatus


def check_statuses(book: HealthBook, endpoint: Endpoint) -> list[tuple[str, EndpointStatus]]:
    """(check name, status) of every check of an endpoint with several (or of one of its units), in
    config order; [] for any other endpoint."""
    several = endpoint.checks
    if several is None:
        return []
    key = endpoint.endpoint_key
    return [(check.name, book.status(unit_key(key, check.name))) for check in several.checks]


def combined(book: HealthBook, endpoint: Endpoint, now: float) -> EndpointStatus:
    """The combined status of the endpoint `endpoint` (or its unit) belongs to, from the book."""
    several = endpoint.checks
    assert several is not None
    previous = book.status(endpoint.endpoint_key)
    return combine(several.health, check_statuses(book, endpoint), previous, now)


def recombine(book: HealthBook, probed: Mapping[EndpointKey, Endpoint], now: float) -> int:
    """Record the combined verdict of every endpoint with several checks among `probed` (units); how
    many verdicts changed."""
    done: set[EndpointKey] = set()
    changed = 0
    for unit in probed.values():
        if not unit.unit or unit.endpoint_key in done:
            continue
        done.add(unit.endpoint_key)
        status = combined(book, unit, now)
        if book.known(unit.endpoint_key) != status:
            changed += book.record(unit.endpoint_key, status)
    return changed


class CheckGauges:
    """gslbd_endpoint_check_up per unit probed here: set on every result, and for every unit after a
    start or reload (the series of units that went away are removed)."""

    def __init__(self) -> None:
        self._labels: set[tuple[str, str, str]] = set()

    def set(self, unit: Endpoint, status: EndpointStatus) -> None:
        assert unit.check is not None
        ENDPOINT_CHECK_UP.labels(unit.service, unit.address, unit.check.name).set(int(check_up(status)))

    def update(self, book: HealthBook, probed: Mapping[EndpointKey, Endpoint]) -> None:
        labels: set[tuple[str, str, str]] = set()
        for key, unit in probed.items():
            if unit.unit and unit.check is not None:
                labels.add((unit.service, unit.address, unit.check.name))
                self.set(unit, book.status(key))
        for gone in self._labels - labels:
            ENDPOINT_CHECK_UP.remove(*gone)
        self._labels = labels

    def clear(self) -> None:
        for gone in self._labels:
            ENDPOINT_CHECK_UP.remove(*gone)
        self._labels = set()
