"""The HTTP admin API: service status, run-time admin state, reload, metrics, health and readiness.

control.Control      what the running instance offers the API (App implements it; the API never
                     imports app or server)
server.ApiServer     the aiohttp application on `api.listen`
console, events      the operator console at / (static/), its JSON and its Server-Sent Events
changes.ChangeLog    the ring of recent verdicts, admin changes and reloads (App records, the API reads)
"""

from __future__ import annotations

from gslbd.api.control import Control, DnsCounters, EndpointView, Health, ServiceStatus

__all__ = ["Control", "DnsCounters", "EndpointView", "Health", "ServiceStatus"]
