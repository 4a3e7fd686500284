"""The open-file limit and the connection budget."""

from __future__ import annotations

import logging
import resource

import pytest

from gslbd.limits import MAX_CONNECTIONS, ConnectionBudget, budget_for, raise_nofile


class Conn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_the_budget_closes_the_least_recently_active_connection_first(
    caplog: pytest.LogCaptureFixture,
) -> None:
    budget = ConnectionBudget(3, nofile=1024)
    a, b, c, d, e = (Conn(n) for n in "abcde")
    for conn in (a, b, c):
        assert budget.admit(conn, "dns") == 0
    budget.touch(a)  # a completed a query: b is now the least recently active
    with caplog.at_level(logging.WARNING, logger="gslbd.limits"):
        assert budget.admit(d, "dns") == 1
        assert budget.admit(e, "api") == 1
    assert [x.closed for x in (a, b, c, d, e)] == [False, True, True, False, False]
    assert len(budget) == 3 and budget.evictions == 2
    assert len(caplog.records) == 1  # logged once, not per eviction
    assert "connection budget of 3 (open-file limit 1024) is full" in caplog.records[0].getMessage()
    budget.forget(a)
    assert budget.admit(Conn("f"), "dns") == 0


@pytest.mark.parametrize(
    ("nofile", "expected"),
    [(1024, 896), (4096, 3687), (100, 16), (1_048_576, MAX_CONNECTIONS)],
)
def test_the_budget_leaves_a_reserve_of_the_open_file_limit(nofile: int, expected: int) -> None:
    assert budget_for(nofile) == expected


def test_raise_nofile_raises_the_soft_limit_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        if hard != resource.RLIM_INFINITY and hard > 64:
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        now = raise_nofile()
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == now
        assert now == (hard if hard != resource.RLIM_INFINITY else now)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
