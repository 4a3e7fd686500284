"""A real gslbd process with several checks per endpoint (`endpoints[].checks`, `health: all|any`): each
check runs against its own real backend (HTTP and TCP on loopback); with `all` one failing check takes
the endpoint out of the DNS answer, with `any` it stays until both fail; /metrics shows each check's
verdict, the sites answered and the failover events, the API and explain show each check's verdict."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import dns.message
import dns.query
import dns.rdatatype
import pytest
from gslbd_harness import Running, free_port, running_gslbd
from health_app_support import TcpBackend, ThreadedBackend, http_get, wait_until

pytestmark = pytest.mark.integration

ZONE = "gslb.example.com."
ALL = f"all.{ZONE}"
ANY = f"any.{ZONE}"
TOKEN = "multicheck-token"


def config(web: int, tcp: int, us: int, api: int) -> str:
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
api: {{listen: 127.0.0.1:{api}, token: {TOKEN}}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
checks:
  web: {{type: http, port: {web}, path: /healthz, interval: 200ms, timeout: 150ms, rise: 1, fall: 2}}
  port: {{type: tcp, port: {tcp}, interval: 200ms, timeout: 150ms, rise: 1, fall: 2}}
  us: {{type: http, port: {us}, path: /healthz, interval: 200ms, timeout: 150ms, rise: 1, fall: 2}}
services:
  - name: {ALL}
    policy: failover
    failover_order: [eu, us]
    endpoints:
      - {{address: 192.0.2.10, site: eu, checks: [web, port], probe_address: 127.0.0.1}}
      - {{address: 198.51.100.10, site: us, check: us, probe_address: 127.0.0.1}}
  - name: {ANY}
    policy: failover
    failover_order: [eu, us]
    health: any
    endpoints:
      - {{address: 192.0.2.20, site: eu, checks: [web, port], probe_address: 127.0.0.1}}
      - {{address: 198.51.100.20, site: us, check: us, probe_address: 127.0.0.1}}
"""


def answer(server: Running, name: str) -> list[str]:
    reply = dns.query.udp(
        dns.message.make_query(name, dns.rdatatype.A), "127.0.0.1", port=server.port, timeout=2
    )
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def metric(scrape: str, name: str, **labels: str) -> float | None:
    """The value of one sample in a /metrics text (labels in any order), None when there is none."""
    for line in scrape.splitlines():
        found = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if found is None:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1)))
        if have == labels:
            return float(found.group(2))
    return None


@pytest.fixture
def backends() -> Iterator[tuple[ThreadedBackend, TcpBackend, ThreadedBackend]]:
    web, tcp, us = ThreadedBackend(), TcpBackend(), ThreadedBackend()
    try:
        yield web, tcp, us
    finally:
        web.close()
        tcp.stop()
        us.close()


def test_all_takes_the_endpoint_out_on_one_failing_check_any_when_both_fail_and_metrics_count_it(
    tmp_path: Path, backends: tuple[ThreadedBackend, TcpBackend, ThreadedBackend]
) -> None:
    web, tcp, us = backends
    api = free_port()
    base = f"http://127.0.0.1:{api}"
    with running_gslbd(tmp_path, config(web.port, tcp.port, us.port, api), zone=ZONE) as server:

        def scrape() -> str:
            status, text = http_get(f"{base}/metrics")
            assert status == 200
            return str(text)

        def check_up(name: str, address: str, check: str) -> float | None:
            return metric(scrape(), "gslbd_endpoint_check_up", service=name, address=address, check=check)

        def checks(name: str, address: str) -> dict[str, str]:
            _, body = http_get(f"{base}/api/v1/services/{name}")
            endpoint = next(e for e in body["endpoints"] if e["address"] == address)
            return {c["name"]: c["health"] for c in endpoint["checks"]} | {"": endpoint["health"]}

        wait_until(lambda: checks(ALL, "192.0.2.10") == {"web": "up", "port": "up", "": "up"})
        assert answer(server, ALL) == ["192.0.2.10"] and answer(server, ANY) == ["192.0.2.20"]
        assert check_up(ALL, "192.0.2.10", "web") == 1 and check_up(ALL, "192.0.2.10", "port") == 1
        assert metric(scrape(), "gslbd_service_answer_site_info", service=ALL, site="eu") == 1

        # The web check fails: all -> the eu endpoint leaves the answer; any -> it stays (port is up).
        web.healthy = False
        wait_until(lambda: answer(server, ALL) == ["198.51.100.10"])
        assert checks(ALL, "192.0.2.10") == {"web": "down", "port": "up", "": "down"}
        # any's endpoint has its own probe of the same backend: once it has seen it fail, still answered
        wait_until(lambda: checks(ANY, "192.0.2.20") == {"web": "down", "port": "up", "": "up"})
        assert answer(server, ANY) == ["192.0.2.20"]
        text = scrape()
        assert metric(text, "gslbd_endpoint_check_up", service=ALL, address="192.0.2.10", check="web") == 0
        assert metric(text, "gslbd_endpoint_check_up", service=ALL, address="192.0.2.10", check="port") == 1
        assert metric(text, "gslbd_service_failovers_total", service=ALL, direction="away") == 1
        assert metric(text, "gslbd_service_answer_site_info", service=ALL, site="us") == 1
        assert metric(text, "gslbd_service_answer_site_info", service=ALL, site="eu") is None
        assert metric(text, "gslbd_service_failovers_total", service=ANY, direction="away") is None
        _, explained = http_get(f"{base}/api/v1/services/{ALL}/answer?client=192.0.2.1")
        assert "health down (health all: web down, port up)" in explained["explanation"]

        # The port check fails too: any -> now out as well.
        tcp.stop()
        wait_until(lambda: answer(server, ANY) == ["198.51.100.20"])
        assert checks(ANY, "192.0.2.20") == {"web": "down", "port": "down", "": "down"}
        assert metric(scrape(), "gslbd_service_failovers_total", service=ANY, direction="away") == 1

        # Both recover: both fail back, counted once each.
        web.healthy = True
        tcp.start()
        wait_until(lambda: answer(server, ALL) == ["192.0.2.10"] and answer(server, ANY) == ["192.0.2.20"])
        text = scrape()
        assert metric(text, "gslbd_service_failovers_total", service=ALL, direction="back") == 1
        assert metric(text, "gslbd_service_failovers_total", service=ANY, direction="back") == 1
        # any came back with its first check up; the port check follows on its own
        wait_until(lambda: check_up(ANY, "192.0.2.20", "port") == 1)
