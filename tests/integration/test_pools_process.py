"""services[].pools and rules in a real `gslbd serve`: HTTP backends on loopback, clients placed by ECS in
topology networks. eu clients get the europe pool and fall back to america while europe has fewer than
its min_healthy up; every other client gets america; a networks rule sends one range to asia."""

from __future__ import annotations

from pathlib import Path

import dns.edns
from gslbd_harness import Running, running_gslbd
from health_app_support import ThreadedBackend, wait_until

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"


def config_text(eu1: ThreadedBackend, eu2: ThreadedBackend, us: ThreadedBackend) -> str:
    check = (
        "type: http, path: /healthz, expect_status: [200], interval: 200ms, timeout: 150ms, rise: 1, fall: 1"
    )
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: @LISTEN@, lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
topology:
  networks:
    - {{cidr: 10.1.0.0/16, site: eu}}
    - {{cidr: 10.2.0.0/16, site: us}}
checks:
  eu1: {{port: {eu1.port}, {check}}}
  eu2: {{port: {eu2.port}, {check}}}
  us: {{port: {us.port}, {check}}}
services:
  - name: {APP}
    endpoints:
      - {{address: 192.0.2.10, site: eu, check: eu1, probe_address: 127.0.0.1}}
      - {{address: 192.0.2.11, site: eu, check: eu2, probe_address: 127.0.0.1}}
      - {{address: 198.51.100.10, site: us, check: us, probe_address: 127.0.0.1}}
      - {{address: 203.0.113.10, site: ap, check: none}}
    pools:
      europe: {{sites: [eu], min_healthy: 2, fallback: america}}
      america: {{sites: [us], fallback: asia}}
      asia: {{endpoints: [203.0.113.10]}}
    rules:
      - {{sites: [eu], pool: europe}}
      - {{networks: [10.9.0.0/16], pool: asia}}
      - {{pool: america}}
"""


def addresses(server: Running, subnet: str) -> list[str]:
    ecs = dns.edns.ECSOption.from_text(subnet)
    reply = server.ask(APP, use_edns=0, options=[ecs])
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def test_rules_send_each_client_to_its_pool_and_a_short_pool_falls_back(tmp_path: Path) -> None:
    eu1, eu2, us = ThreadedBackend(), ThreadedBackend(), ThreadedBackend()
    try:
        with running_gslbd(tmp_path, config_text(eu1, eu2, us), zone=ZONE) as server:
            wait_until(lambda: addresses(server, "10.1.2.0/24") == ["192.0.2.10", "192.0.2.11"])
            assert addresses(server, "10.2.3.0/24") == ["198.51.100.10"]  # site us: the catch-all
            assert addresses(server, "10.9.1.0/24") == ["203.0.113.10"]  # the networks rule
            assert addresses(server, "172.16.0.0/24") == ["198.51.100.10"]  # unknown: the catch-all
            eu2.healthy = False  # europe has 1 of min_healthy 2 up: america
            wait_until(lambda: addresses(server, "10.1.2.0/24") == ["198.51.100.10"])
            us.healthy = False  # america has none: asia
            wait_until(lambda: addresses(server, "10.1.2.0/24") == ["203.0.113.10"])
            assert addresses(server, "10.2.3.0/24") == ["203.0.113.10"]
            eu2.healthy = True
            wait_until(lambda: addresses(server, "10.1.2.0/24") == ["192.0.2.10", "192.0.2.11"])
            assert server.alive()
    finally:
        for backend in (eu1, eu2, us):
            backend.close()
