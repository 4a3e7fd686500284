"""k8gb scenario catalogue, weighted: every site draws one site per query with probability weight/sum
over the sites that publish healthy endpoints (eu 60, us 30, ap 10), so the split holds whichever
site's nameserver a resolver asks; a site that dies leaves the split to the others."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sites import (
    BACKENDS,
    SERVICES,
    SITES,
    W_AP,
    W_EU,
    W_US,
    WEIGHTS,
    Lab,
    W,
    backend_address,
    baseline,
    eventually,
)

pytestmark = pytest.mark.slow

QUERIES = 1000
# The binomial spread of a share over 1,000 draws is at most 1.6 points; 5 points is > 3 sigma.
TOLERANCE = 5.0
OWNER = {next(iter(W_EU)): "eu", next(iter(W_US)): "us", next(iter(W_AP)): "ap"}


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    with Lab(tmp_path, SERVICES, BACKENDS) as running:
        baseline(running)
        yield running


def shares(lab: Lab, site: str) -> dict[str, float]:
    """Percent of QUERIES answers from `site` that name each site's endpoint."""
    counts: Counter[str] = Counter()
    for _ in range(QUERIES):
        got = lab.answers(site, W)
        assert got is not None and len(got) == 1, got
        counts[OWNER[next(iter(got))]] += 1
    return {s: 100.0 * counts[s] / QUERIES for s in SITES}


def sites_answered(lab: Lab, site: str, queries: int = 200) -> frozenset[str]:
    return frozenset(OWNER[a] for _ in range(queries) for a in (lab.answers(site, W) or ()))


def test_every_site_splits_answers_by_the_site_weights(lab: Lab) -> None:
    eventually(
        lambda: {s: sites_answered(lab, s, 100) for s in SITES}, dict.fromkeys(SITES, frozenset(SITES)), 10
    )
    for site in SITES:
        got = shares(lab, site)
        for target, weight in WEIGHTS.items():
            assert abs(got[target] - weight) <= TOLERANCE, (site, got)


def test_a_dead_site_leaves_the_split_to_the_others_in_proportion(lab: Lab) -> None:
    eventually(
        lambda: {s: sites_answered(lab, s, 100) for s in SITES}, dict.fromkeys(SITES, frozenset(SITES)), 10
    )
    lab.set_backend(backend_address("eu", 21), "dead")
    others = frozenset({"us", "ap"})
    eventually(lambda: {s: sites_answered(lab, s) for s in SITES}, dict.fromkeys(SITES, others), 8)
    for site in SITES:
        got = shares(lab, site)
        assert got["eu"] == 0.0
        assert abs(got["us"] - 75.0) <= TOLERANCE, (site, got)  # 30 / (30 + 10)
        assert abs(got["ap"] - 25.0) <= TOLERANCE, (site, got)
