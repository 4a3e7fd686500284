"""The operator console's data: service rows (filtered and paged), summary counts, the change log and
the answer a client gets, as JSON; and the console's static files (gslbd/api/static/).

Pure functions over what Control returns, so the console is usable at 10,000 services: the page asks
for one page of compact rows (`rows_json`, from `Control.rows()`) and gets the counts with it, never
every endpoint of every service.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any

from gslbd.api.changes import Change
from gslbd.api.control import AnswerView, ClusterView, PeerView, ServiceRow
from gslbd.api.render import iso_time, peer_json

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


def service_state(r: ServiceRow) -> ServiceState:
    if r.endpoints and r.up == r.endpoints:
        return ServiceState.UP
    return ServiceState.DOWN if r.up == 0 else ServiceState.DEGRADED


def matches(r: ServiceRow, query: str) -> bool:
    """Case-insensitive: every word of `query` is part of the name, an endpoint's address or site."""
    return all(w in r.words for w in query.lower().split())


def row_json(r: ServiceRow) -> dict[str, Any]:
    """One service as a list row: its state and counts, not its endpoints' details."""
    return {
        "name": r.name,
        "policy": r.policy.value,
        "state": service_state(r).value,
        "endpoints": r.endpoints,
        "endpoints_up": r.up,
        "unhealthy": r.unhealthy,
        "admin_down": r.admin_down,
        "admin_up": r.admin_up,
    }


def counts_json(rows: Sequence[ServiceRow]) -> dict[str, Any]:
    """Services by state and endpoints by effective state and admin override."""
    by_state = dict.fromkeys((s.value for s in ServiceState), 0)
    total = up = admin_down = admin_up = 0
    for r in rows:
        by_state[service_state(r).value] += 1
        total += r.endpoints
        up += r.up
        admin_down += r.admin_down
        admin_up += r.admin_up
    endpoints = {"total": total, "up": up, "down": total - up, "admin_down": admin_down, "admin_up": admin_up}
    return {"services": {"total": len(rows), **by_state}, "endpoints": endpoints}


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

    def selects(self, r: ServiceRow) -> bool:
        if self.state == "admin":
            if not (r.admin_down or r.admin_up):
                return False
        elif self.state and service_state(r).value != self.state:
            return False
        return matches(r, self.q)


def rows_json(
    rows: Sequence[ServiceRow], query: RowQuery, seq: int, counts: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One page of the rows `query` selects, how many it selects in all, and the counts of everything
    (`counts_json(rows)` unless given). `seq` is the change log's newest sequence number when the rows
    were read."""
    selected = [r for r in rows if query.selects(r)]
    page = selected[query.offset : query.offset + query.limit]
    return {
        "seq": seq,
        "total": len(selected),
        "offset": query.offset,
        "limit": query.limit,
        "rows": [row_json(s) for s in page],
        "counts": counts if counts is not None else counts_json(rows),
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
    counts: dict[str, Any],
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
        **counts,
        "peers": {
            "total": len(peers),
            "fresh": fresh,
            "stale": len(peers) - fresh,
            "sites": peer_docs,
            "partitioned": any(p.partitioned for p in peers),
        },
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
