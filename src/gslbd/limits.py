"""The open-file limit and one budget of TCP connections per process, shared by the DNS TCP listeners
and the admin API (docs/server.md, "Connection budget").

At the first use the soft RLIMIT_NOFILE is raised to the hard limit. The budget is that limit less a
reserve for everything else a process opens (listening sockets, UDP sockets, health probes, Redis, the
state file, logs): a tenth of the limit, at least 128, and at most `MAX_CONNECTIONS` connections in all
(each costs memory too). When the budget is full, a new connection closes the one that was active least
recently (a DNS connection counts as active when it completes a query, so a client that trickles bytes
or sends nothing is the first to go); the new client is always served. The first time in a minute that
this happens a warning is logged; every eviction is counted.

Only the standard library and gslbd.metrics: the server and the API (sibling layers) both use it.
"""

from __future__ import annotations

import functools
import logging
import resource
import time
from collections import OrderedDict
from typing import Protocol

from prometheus_client import Counter

from gslbd.metrics import CONNECTION_BUDGET, CONNECTION_BUDGET_EVICTIONS

log = logging.getLogger(__name__)

MIN_RESERVE = 128
MAX_CONNECTIONS = 100_000
LOG_INTERVAL = 60.0


@functools.cache
def _evictions(listener: str) -> Counter:
    return CONNECTION_BUDGET_EVICTIONS.labels(listener)


class Closable(Protocol):
    def close(self) -> None: ...


def raise_nofile() -> int:
    """Raise the soft open-file limit to the hard one (when allowed); the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or (soft != resource.RLIM_INFINITY and soft < hard):
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            log.warning("could not raise the open-file limit from %d to %d", soft, target)
    return int(soft) if soft != resource.RLIM_INFINITY else 1_048_576


def budget_for(nofile: int) -> int:
    """Connections allowed under an open-file limit."""
    reserve = max(MIN_RESERVE, nofile // 10)
    return max(16, min(MAX_CONNECTIONS, nofile - reserve))


class ConnectionBudget:
    """The open connections of one process, least recently active first."""

    def __init__(self, limit: int, nofile: int = 0) -> None:
        self.limit = limit
        self.nofile = nofile
        self._open: OrderedDict[Closable, None] = OrderedDict()
        self.evictions = 0
        self._logged_at = -LOG_INTERVAL
        CONNECTION_BUDGET.set(limit)

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, conn: Closable, listener: str) -> int:
        """Track a new connection; when the budget is full first close the least recently active ones.
        The number closed."""
        closed = 0
        while len(self._open) >= self.limit:
            oldest, _ = self._open.popitem(last=False)
            oldest.close()
            closed += 1
        if closed:
            self.evictions += closed
            _evictions(listener).inc(closed)
            now = time.monotonic()
            if now - self._logged_at >= LOG_INTERVAL:
                self._logged_at = now
                log.warning(
                    "connection budget of %d (open-file limit %d) is full: closing the least recently "
                    "active connections for new ones (counted in gslbd_connection_budget_evictions_total; "
                    "this is logged at most once a minute)",
                    self.limit,
                    self.nofile,
                )
        self._open[conn] = None
        return closed

    def touch(self, conn: Closable) -> None:
        """The connection was active (a complete request): it goes to the back of the queue."""
        if conn in self._open:
            self._open.move_to_end(conn)

    def forget(self, conn: Closable) -> None:
        self._open.pop(conn, None)


_process_budget: ConnectionBudget | None = None


def process_budget() -> ConnectionBudget:
    """This process's budget, made at the first call (which raises the open-file limit)."""
    global _process_budget
    if _process_budget is None:
        nofile = raise_nofile()
        _process_budget = ConnectionBudget(budget_for(nofile), nofile)
    return _process_budget
