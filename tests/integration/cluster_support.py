"""What the cluster tests share: a config with HTTP-checked endpoints in cluster mode, an HTTP backend
that counts the probes per endpoint, and small waiting helpers."""

from __future__ import annotations

import http.server
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gslbd_harness import free_port
from health_app_support import APP, ZONE

ADDRESSES = ("192.0.2.10", "192.0.2.11", "192.0.2.12")


def cluster_config(
    redis_url: str,
    backend_port: int,
    *,
    interval: str = "500ms",
    timeout: str = "200ms",
    rise: int = 1,
    fall: int = 1,
    sync_mode: str = "lock",
    listen: str = "@LISTEN@",
    prefix: str = "gslb:",
    extra: str = "",
) -> str:
    """One round-robin service `app` with three endpoints, each checked over HTTP at
    /health/<address> on the backend; cluster mode on `redis_url`. `@LISTEN@` stays for `with_port`
    (or the process harness) to fill in."""
    endpoints = "\n".join(
        f"      - {{address: {a}, check: c{i}, probe_address: 127.0.0.1}}" for i, a in enumerate(ADDRESSES)
    )
    checks = "\n".join(
        f"  c{i}: {{type: http, port: {backend_port}, path: /health/{a}, expect_status: [200], "
        f"interval: {interval}, timeout: {timeout}, rise: {rise}, fall: {fall}}}"
        for i, a in enumerate(ADDRESSES)
    )
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: {listen}, lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
checks:
{checks}
services:
  - name: {APP}
    endpoints:
{endpoints}
cluster:
  redis: {{url: "{redis_url}", key_prefix: "{prefix}", sync_mode: {sync_mode}}}
{extra}
"""


def with_port(text: str) -> str:
    """The config with @LISTEN@ replaced by a port free for UDP and TCP. (Port 0 would take UDP's random
    port for TCP too, which an outgoing connection of the same process may already use.)"""
    return text.replace("@LISTEN@", f'["127.0.0.1:{free_port()}"]')


class _Handler(http.server.BaseHTTPRequestHandler):
    server: CountingBackend
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        address = self.path.rsplit("/", 1)[-1]
        with self.server.lock:
            self.server.probes[address] += 1
            self.server.times.setdefault(address, []).append(time.monotonic())
        healthy = address not in self.server.failing
        body = b"ok\n" if healthy else b"failing\n"
        self.send_response(200 if healthy else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class CountingBackend(http.server.ThreadingHTTPServer):
    """GET /health/<address>: 200, or 503 while <address> is in `failing`; probes counted per address
    (the path's last segment: any other key works the same)."""

    daemon_threads = True

    def __init__(self, address: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((address, port), _Handler)
        self.port: int = self.server_address[1]
        self.failing: set[str] = set()
        self.probes: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def count(self, address: str) -> int:
        with self.lock:
            return self.probes[address]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


@contextmanager
def counting_backend() -> Iterator[CountingBackend]:
    backend = CountingBackend()
    try:
        yield backend
    finally:
        backend.close()


class Records(logging.Handler):
    """Collects the log records of one logger while installed (caplog sees only the root's)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int = logging.DEBUG) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= level]


@contextmanager
def captured(logger: str) -> Iterator[Records]:
    handler = Records()
    log = logging.getLogger(logger)
    old_level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)
