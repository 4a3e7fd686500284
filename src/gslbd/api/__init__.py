"""The HTTP admin API: service status, run-time admin state, reload, metrics, health and readiness.

control.Control      what the running instance offers the API (App implements it; the API never
                     imports app or server)
server.ApiServer     the aiohttp application on `api.listen`
"""

from __future__ import annotations

from gslbd.api.control import Control, DnsCounters, EndpointView, Health, ServiceStatus

__all__ = ["Control", "DnsCounters", "EndpointView", "Health", "ServiceStatus"]
