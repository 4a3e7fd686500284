"""How the API shows services: JSON documents and the HTML status page (no scripts, no framework)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from gslbd.api.control import CheckView, EndpointView, PeerView, ServiceStatus


def iso_time(ts: float | None) -> str | None:
    """Unix seconds as ISO 8601 UTC with a Z ("2024-05-01T10:11:12.345Z"); None stays None."""
    if ts is None:
        return None
    moment = datetime.fromtimestamp(ts, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _last(e: EndpointView | CheckView) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    last_check = None
    if e.last_check is not None:
        last_check = {
            "time": e.last_check,
            "at": iso_time(e.last_check),
            "ok": e.last_ok,
            "detail": e.last_detail,
        }
    last_change = None
    if e.last_change is not None:
        last_change = {"time": e.last_change, "at": iso_time(e.last_change), "reason": e.last_change_reason}
    return last_check, last_change


def check_json(c: CheckView) -> dict[str, Any]:
    last_check, last_change = _last(c)
    return {
        "name": c.name,
        "type": c.type,
        "health": c.health.value,
        "last_check": last_check,
        "last_change": last_change,
    }


def endpoint_json(e: EndpointView) -> dict[str, Any]:
    last_check, last_change = _last(e)
    several = {"health_mode": e.health_mode, "checks": [check_json(c) for c in e.checks]}
    loaded = {"load": e.load, "load_weight": e.load_weight, "share": e.share}  # docs/policies/load.md
    return {
        "address": e.address,
        "site": e.site,
        "region": e.region,
        "zone": e.zone,
        "check": e.check,
        "health": e.health.value,
        "admin": e.admin.value,
        "effective_up": e.effective_up,
        "last_check": last_check,
        "last_change": last_change,
        "weight": e.weight,
        "source": e.source,
        "patched": list(e.patched),
        **(several if e.health_mode is not None else {}),
        **(loaded if (e.load, e.load_weight, e.share) != (None, None, None) else {}),
    }


def removed_json(e: EndpointView) -> dict[str, Any]:
    """A config endpoint the endpoint overlay removed: what the config says of it."""
    return {"address": e.address, "site": e.site, "weight": e.weight, "source": e.source, "removed": True}


def service_json(s: ServiceStatus) -> dict[str, Any]:
    return {
        "name": s.name,
        "policy": s.policy.value,
        "endpoints_up": s.endpoints_up,
        "endpoints": [endpoint_json(e) for e in s.endpoints],
        "removed": [removed_json(e) for e in s.removed],
    }


def services_json(services: Sequence[ServiceStatus]) -> dict[str, Any]:
    return {"services": [service_json(s) for s in services]}


def peer_json(p: PeerView) -> dict[str, Any]:
    return {
        "name": p.name,
        "state": p.state,
        "nameservers": list(p.nameservers),
        "last_answer": p.last_answer,
        "last_answer_at": iso_time(p.last_answer),
        "last_answer_age": p.last_answer_age,
        "endpoints": p.endpoints,
        "errors": p.errors,
        "polls": p.polls,
        "failing": p.failing,
        "detail": p.detail,
        "heartbeat": p.heartbeat,
        "heard": p.heard,
    }


def peers_json(peers: Sequence[PeerView]) -> dict[str, Any]:
    """The peers page; `partitioned` (peers.quorum): this site hears fewer than a majority of the
    sites and keeps the last agreed verdicts of remote endpoints."""
    return {"peers": [peer_json(p) for p in peers], "partitioned": any(p.partitioned for p in peers)}


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3em 0.8em; text-align: left; font-size: 0.9em; }
th { background: #f4f4f4; }
.up { color: #176f2c; font-weight: bold; } .down { color: #b3261e; font-weight: bold; }
.unknown { color: #777; } .muted { color: #777; }
"""


def _cell(text: str, css: str | None = None) -> str:
    cls = f' class="{css}"' if css else ""
    return f"<td{cls}>{html.escape(text)}</td>"


def _endpoint_row(e: EndpointView) -> str:
    effective = "up" if e.effective_up else "down"
    last_check = ""
    if e.last_check is not None:
        verdict = "ok" if e.last_ok else "failed"
        last_check = f"{iso_time(e.last_check)} {verdict}: {e.last_detail}".rstrip(": ")
    last_change = ""
    if e.last_change is not None:
        last_change = f"{iso_time(e.last_change)} {e.last_change_reason}".rstrip()
    locality = "/".join(p for p in (e.region, e.zone) if p)
    return (
        "<tr>"
        + _cell(e.address)
        + _cell(e.site)
        + _cell(locality)
        + _cell(_check_text(e), None if e.check else "muted")
        + _cell(e.health.value, e.health.value)
        + _cell(e.admin.value)
        + _cell(effective, effective)
        + _cell(last_check)
        + _cell(last_change)
        + "</tr>"
    )


def _check_text(e: EndpointView) -> str:
    """The check cell: the type, or for several checks their combination and each one's verdict."""
    if not e.checks:
        return e.check or "none"
    return f"{e.health_mode}: " + ", ".join(f"{c.name} {c.health.value}" for c in e.checks)


def status_page(services: Sequence[ServiceStatus], ready: bool) -> str:
    """The status page: one table per service. It reloads itself every 5 seconds."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="refresh" content="5">',
        "<title>gslbd status</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>gslbd status</h1>",
        f'<p>Ready: <span class="{"up" if ready else "down"}">{"yes" if ready else "no"}</span>'
        ' &middot; <a href="/api/v1/services">JSON</a> &middot; <a href="/metrics">metrics</a>'
        ' &middot; <a href="/api/v1/openapi.json">OpenAPI</a></p>',
    ]
    if not services:
        parts.append("<p>No services are configured.</p>")
    for s in services:
        parts.append(
            f'<h2>{html.escape(s.name)} <span class="muted">{html.escape(s.policy.value)}, '
            f"{s.endpoints_up} of {len(s.endpoints)} up</span></h2>"
        )
        parts.append(
            "<table><tr><th>Endpoint</th><th>Site</th><th>Locality</th><th>Check</th><th>Health</th>"
            "<th>Admin</th><th>Effective</th><th>Last check</th><th>Last change</th></tr>"
        )
        parts.extend(_endpoint_row(e) for e in s.endpoints)
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
