"""The operator console's data: service rows (filtered and paged), summary counts, the change log and
the answer a client gets, as JSON; and the console's static files (gslbd/api/static/).

Pure functions over what Control returns, so the console is usable at 10,000 services: the page asks
for one page of compact rows (`rows_json`) and gets the counts with it, never every endpoint of every
service.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any

from gslbd.api.changes import Change
from gslbd.api.control import AnswerView, ClusterView, PeerView, ServiceStatus
from gslbd.api.render import iso_time, peer_json
from gslbd.types import AdminState

MAX_PAGE = 500  # rows per request at most
DEFAULT_PAGE = 100

# Static files of the console: name -> content type.
ASSETS = {
    "console.js": "text/javascript",
    "console.css": "text/css",
}


class ServiceState(StrEnum):
    """A service at a glance: every endpoint a candidate (up), some (degraded), none (down)."""

    UP = "up"
    DEGRADED = "degraded"
    DOWN = "down"


# The console's state filter: a ServiceState, or "admin" (an endpoint has a run-time or config admin
# override other than obey).
FILTERS = (*(s.value for s in ServiceState), "admin")


def service_state(s: ServiceStatus) -> ServiceState:
    total, up = len(s.endpoints), s.endpoints_up
    if total and up == total:
        return ServiceState.UP
    return ServiceState.DOWN if up == 0 else ServiceState.DEGRADED


def has_admin_override(s: ServiceStatus) -> bool:
    return any(e.admin is not AdminState.OBEY for e in s.endpoints)


def matches(s: ServiceStatus, query: str) -> bool:
    """Case-insensitive: every word of `query` is part of the name, an endpoint's address or site."""
    words = query.lower().split()
    if not words:
        return True
    haystack = " ".join([s.name, *(e.address for e in s.endpoints), *(e.site for e in s.endpoints)])
    return all(w in haystack for w in words)


def row_json(s: ServiceStatus) -> dict[str, Any]:
    """One service as a list row: its state and counts, not its endpoints' details."""
    return {
        "name": s.name,
        "policy": s.policy.value,
        "state": service_state(s).value,
        "endpoints": len(s.endpoints),
        "endpoints_up": s.endpoints_up,
        "unhealthy": sum(1 for e in s.endpoints if e.health.value == "down"),
        "admin_down": sum(1 for e in s.endpoints if e.admin is AdminState.DOWN),
        "admin_up": sum(1 for e in s.endpoints if e.admin is AdminState.UP),
    }


def counts_json(services: Sequence[ServiceStatus]) -> dict[str, Any]:
    """Services by state and endpoints by effective state and admin override."""
    by_state = dict.fromkeys((s.value for s in ServiceState), 0)
    endpoints = {"total": 0, "up": 0, "down": 0, "admin_down": 0, "admin_up": 0}
    for s in services:
        by_state[service_state(s).value] += 1
        for e in s.endpoints:
            endpoints["total"] += 1
            endpoints["up" if e.effective_up else "down"] += 1
            if e.admin is AdminState.DOWN:
                endpoints["admin_down"] += 1
            elif e.admin is AdminState.UP:
                endpoints["admin_up"] += 1
    return {"services": {"total": len(services), **by_state}, "endpoints": endpoints}


@dataclass(frozen=True, slots=True)
class RowQuery:
    """What the list shows: words to match (`q`), a state filter ("" = all), and the page."""

    q: str = ""
    state: str = ""
    offset: int = 0
    limit: int = DEFAULT_PAGE

    @classmethod
    def parse(cls, params: dict[str, str]) -> RowQuery:
        """From query parameters; ValueError with a message for the 400 answer."""
        state = params.get("state", "").strip().lower()
        if state and state not in FILTERS:
            raise ValueError(f"unknown state filter {state!r}; valid: {', '.join(FILTERS)}")
        try:
            offset = int(params.get("offset", "0"))
            limit = int(params.get("limit", str(DEFAULT_PAGE)))
        except ValueError:
            raise ValueError("offset and limit must be integers") from None
        if offset < 0 or not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"offset must be >= 0 and limit between 1 and {MAX_PAGE}")
        return cls(params.get("q", "")[:200], state, offset, limit)

    def selects(self, s: ServiceStatus) -> bool:
        if self.state == "admin":
            if not has_admin_override(s):
                return False
        elif self.state and service_state(s).value != self.state:
            return False
        return matches(s, self.q)


def rows_json(services: Sequence[ServiceStatus], query: RowQuery, seq: int) -> dict[str, Any]:
    """One page of the rows `query` selects, how many it selects in all, and the counts of everything.
    `seq` is the change log's newest sequence number when the services were read."""
    selected = [s for s in services if query.selects(s)]
    page = selected[query.offset : query.offset + query.limit]
    return {
        "seq": seq,
        "total": len(selected),
        "offset": query.offset,
        "limit": query.limit,
        "rows": [row_json(s) for s in page],
        "counts": counts_json(services),
    }


def cluster_json(c: ClusterView | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "redis": c.redis,
        "connected": c.connected,
        "instance_id": c.instance_id,
        "sync_mode": c.sync_mode,
        "members": c.members,
    }


def summary_json(
    services: Sequence[ServiceStatus],
    peers: Sequence[PeerView],
    cluster: ClusterView | None,
    ready: bool,
    seq: int,
) -> dict[str, Any]:
    """Everything the console's header shows."""
    peer_docs = [{**peer_json(p), "heartbeat_age": p.heartbeat_age} for p in peers]
    fresh = sum(1 for p in peers if p.state == "fresh")
    return {
        "ready": ready,
        "seq": seq,
        **counts_json(services),
        "peers": {"total": len(peers), "fresh": fresh, "stale": len(peers) - fresh, "sites": peer_docs},
        "cluster": cluster_json(cluster),
    }


def change_json(c: Change) -> dict[str, Any]:
    return {
        "seq": c.seq,
        "time": c.time,
        "at": iso_time(c.time),
        "kind": c.kind.value,
        "state": c.state,
        "service": c.service,
        "address": c.address,
        "detail": c.detail,
    }


def changes_json(changes: Iterable[Change], seq: int, missed: bool) -> dict[str, Any]:
    return {"seq": seq, "missed": missed, "changes": [change_json(c) for c in changes]}


def answer_json(a: AnswerView) -> dict[str, Any]:
    return {
        "name": a.name,
        "type": a.rtype,
        "client": a.client,
        "rcode": a.rcode,
        "answer": list(a.answer),
        "authority": list(a.authority),
        "additional": list(a.additional),
        "location_dependent": a.location_dependent,
        "explanation": a.explanation,
    }


def parse_client(text: str) -> tuple[str, str | None]:
    """ "192.0.2.1" -> ("192.0.2.1", None); "10.2.0.0/16" -> ("10.2.0.0", "10.2.0.0/16") (asked as a
    resolver sending that EDNS Client Subnet). ValueError with a message for the 400 answer."""
    value = text.strip()
    if not value:
        raise ValueError("client is required: an IP address or a subnet like 10.2.0.0/16")
    try:
        if "/" in value:
            net = ipaddress.ip_network(value, strict=False)
            return str(net.network_address), str(net)
        return str(ipaddress.ip_address(value)), None
    except ValueError:
        raise ValueError(f"client {value!r} is not an IP address or a subnet like 10.2.0.0/16") from None


def console_page() -> bytes:
    return asset("console.html")


def asset(name: str) -> bytes:
    """A static file of the console (read from the installed package)."""
    return resources.files("gslbd.api").joinpath("static", name).read_bytes()
