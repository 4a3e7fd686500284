"""Graceful shutdown of `gslbd serve`: SIGTERM starts the lame duck (/readyz 503 while DNS still
answers) for dns.lame_duck, then the process exits 0; a second signal stops it at once."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from gslbd_harness import Running, free_port, start_gslbd
from health_app_support import ZONE, http_get, wait_until


def config(api_port: int, lame_duck: str) -> str:
    return f"""
version: 1
dns: {{listen: @LISTEN@, lame_duck: {lame_duck}}}
api: {{listen: "127.0.0.1:{api_port}"}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
services:
  - name: app.{ZONE}
    check: none
    endpoints: [{{address: 192.0.2.1}}]
"""


def soa_answered(server: Running) -> bool:
    return bool(server.ask(ZONE, "SOA").answer)


def test_sigterm_fails_readyz_while_dns_answers_for_the_lame_duck_then_exits_0(tmp_path: Path) -> None:
    api_port = free_port()
    readyz = f"http://127.0.0.1:{api_port}/readyz"
    server = start_gslbd(tmp_path, config(api_port, "1500ms"), zone=ZONE)
    try:
        assert http_get(readyz) == (200, "ready\n")
        server.proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        wait_until(lambda: http_get(readyz)[0] == 503, timeout=1)
        # Lame duck: not ready, but DNS and the API still work.
        for _ in range(3):
            assert soa_answered(server)
            assert http_get(f"http://127.0.0.1:{api_port}/healthz")[0] == 200
            time.sleep(0.2)
        assert server.alive()
        assert server.proc.wait(10) == 0
        assert 1.4 <= time.monotonic() - sent < 6
        log = server.log()
        assert "lame duck for 1.5s: DNS still answers, /readyz fails" in log
        assert "stopped" in log
    finally:
        server.kill()


def test_a_second_signal_during_the_lame_duck_stops_at_once(tmp_path: Path) -> None:
    api_port = free_port()
    readyz = f"http://127.0.0.1:{api_port}/readyz"
    server = start_gslbd(tmp_path, config(api_port, "30s"), zone=ZONE)
    try:
        server.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: http_get(readyz)[0] == 503, timeout=2)
        assert soa_answered(server)
        second = time.monotonic()
        server.proc.send_signal(signal.SIGINT)
        assert server.proc.wait(10) == 0
        assert time.monotonic() - second < 3
        assert "second stop signal: stopping now" in server.log()
    finally:
        server.kill()
