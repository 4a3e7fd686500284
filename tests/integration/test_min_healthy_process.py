"""services[].min_healthy in a real `gslbd serve`: HTTP backends on loopback, two endpoints in eu and one in
us; with min_healthy 1.0 one failing eu backend moves the failover answer to us, and back when it
recovers. `gslbd explain` on the same file shows the threshold."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gslbd_harness import Running, gslbd_command, running_gslbd
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
checks:
  eu1: {{port: {eu1.port}, {check}}}
  eu2: {{port: {eu2.port}, {check}}}
  us: {{port: {us.port}, {check}}}
services:
  - name: {APP}
    policy: failover
    failover_order: [eu, us]
    min_healthy: 1.0
    endpoints:
      - {{address: 192.0.2.10, site: eu, check: eu1, probe_address: 127.0.0.1}}
      - {{address: 192.0.2.11, site: eu, check: eu2, probe_address: 127.0.0.1}}
      - {{address: 198.51.100.10, site: us, check: us, probe_address: 127.0.0.1}}
"""


def addresses(server: Running) -> list[str]:
    reply = server.ask(APP)
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def test_one_failing_eu_endpoint_under_min_healthy_1_moves_the_answer_to_us(
    tmp_path: Path, http_backends: tuple[ThreadedBackend, ThreadedBackend]
) -> None:
    eu1, eu2 = http_backends
    us = ThreadedBackend()
    try:
        with running_gslbd(tmp_path, config_text(eu1, eu2, us), zone=ZONE) as server:
            wait_until(lambda: addresses(server) == ["192.0.2.10", "192.0.2.11"])
            eu2.healthy = False
            wait_until(lambda: addresses(server) == ["198.51.100.10"])
            eu2.healthy = True
            wait_until(lambda: addresses(server) == ["192.0.2.10", "192.0.2.11"])
            # Every site below it: eu's remaining endpoint is answered (failover prefers eu), not all_down.
            eu1.healthy = False
            us.healthy = False
            wait_until(lambda: addresses(server) == ["192.0.2.11"])
            assert server.alive()
    finally:
        us.close()
    out = subprocess.run(
        gslbd_command("explain", APP, "--config", str(tmp_path / "gslbd.yaml"), "--client", "192.0.2.200"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "  min_healthy: 100% (a site with fewer of its endpoints of the family up counts as failed)" in (
        out.stdout
    )
