"""k8gb scenario catalogue, failover with failover_order [eu, us, ap]: every site answers the first site
that publishes healthy endpoints; the next when it dies; failback when it returns. Three-site failover
(k8gb #1705): when eu dies every site answers us, never ap, although k8gb returned every secondary."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sites import (
    BACKENDS,
    FO,
    FO_AP,
    FO_EU,
    FO_US,
    SERVICES,
    Lab,
    backend_address,
    baseline,
    converge,
    holds,
    same_everywhere,
)

pytestmark = pytest.mark.slow

CHANGE = 8.0  # generous bound for a change to reach every site on a busy machine


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with Lab(tmp_path, SERVICES, BACKENDS) as running:
        baseline(running)
        yield running


def test_every_site_answers_the_first_site_in_failover_order(lab: Lab) -> None:
    holds(lambda: lab.everywhere(FO), same_everywhere(FO_EU), 1.0)


def test_failover_goes_to_the_next_site_only_and_fails_back(lab: Lab) -> None:
    eu, us = backend_address("eu", 11), backend_address("us", 11)
    lab.set_backend(eu, "dead")
    converge(lab, {FO: same_everywhere(FO_US)}, CHANGE)
    # k8gb #1705: with three sites the secondaries answered every other site (us and ap); here the
    # order holds: ap is never answered while us has a healthy endpoint.
    holds(lambda: lab.everywhere(FO), same_everywhere(FO_US), 1.5)
    lab.set_backend(us, "failing")
    converge(lab, {FO: same_everywhere(FO_AP)}, CHANGE)
    lab.set_backend(us, "up")  # us returns first: back to us, not yet eu
    converge(lab, {FO: same_everywhere(FO_US)}, CHANGE)
    lab.set_backend(eu, "up")  # failback to the primary
    converge(lab, {FO: same_everywhere(FO_EU)}, CHANGE)
