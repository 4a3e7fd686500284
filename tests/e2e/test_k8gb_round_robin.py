"""k8gb scenario catalogue, round robin: every site answers the union of every site's healthy endpoints,
shrinking as endpoints die and growing as they return. Three real gslbd processes (tests/e2e/sites.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sites import (
    BACKENDS,
    RR,
    RR_ALL,
    RR_AP,
    RR_EU,
    RR_US,
    SERVICES,
    SITES,
    Lab,
    backend_address,
    baseline,
    converge,
    same_everywhere,
)

pytestmark = pytest.mark.slow

# An endpoint failure is seen by its own site after one check interval (0.5 s, fall 1) and by the
# others through NOTIFY at once or the next poll (1 s). Generous bound for a busy machine:
CHANGE = 8.0


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with Lab(tmp_path, SERVICES, BACKENDS) as running:
        baseline(running)
        yield running


def test_every_site_answers_the_union_of_all_sites_healthy_endpoints(lab: Lab) -> None:
    assert lab.everywhere(RR) == same_everywhere(RR_ALL)
    # Round robin: each answer holds all five, and the first record rotates.
    firsts = set()
    for _ in range(10):
        reply = lab.ask("us", RR)
        assert reply is not None
        firsts.add(reply.answer[0][0].to_text())
    assert firsts == RR_ALL


def test_the_union_shrinks_as_endpoints_die_and_grows_as_they_return(lab: Lab) -> None:
    eu1, us1, us2 = backend_address("eu", 1), backend_address("us", 1), backend_address("us", 2)
    lab.set_backend(eu1, "failing")  # HTTP 503
    converge(lab, {RR: same_everywhere(RR_ALL - {eu1})}, CHANGE)
    lab.set_backend(us1, "dead")  # connection refused
    converge(lab, {RR: same_everywhere(RR_ALL - {eu1, us1})}, CHANGE)
    # A whole site without healthy endpoints publishes none (NXDOMAIN): the others drop it.
    lab.set_backend(us2, "dead")
    converge(lab, {RR: same_everywhere((RR_EU | RR_AP) - {eu1})}, CHANGE)
    lab.set_backend(us1, "up")
    converge(lab, {RR: same_everywhere(RR_ALL - {eu1, us2})}, CHANGE)
    lab.revive_all()
    converge(lab, {RR: same_everywhere(RR_ALL)}, CHANGE)


def test_a_site_publishes_only_its_own_healthy_endpoints_as_localtargets(lab: Lab) -> None:
    published = {site: lab.answers(site, f"localtargets-{RR}") for site in SITES}
    assert published == {"eu": RR_EU, "us": RR_US, "ap": RR_AP}
    lab.set_backend(backend_address("ap", 1), "dead")
    converge(lab, {RR: same_everywhere(RR_EU | RR_US)}, CHANGE)
    reply = lab.ask("ap", f"localtargets-{RR}")
    assert reply is not None
    assert reply.rcode() == 3  # NXDOMAIN: ap has none
