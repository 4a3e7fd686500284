"""A config whose endpoints are health checked over HTTP against local backends, for the App tests."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import dns.asyncquery
import dns.message
import dns.rdatatype

ZONE = "gslb.example.com."
APP = f"app.{ZONE}"
EU = (APP, "192.0.2.10")
US = (APP, "198.51.100.10")


def health_config(
    listen: str,
    eu_port: int,
    us_port: int,
    *,
    interval: str = "200ms",
    timeout: str = "100ms",
    extra: str = "",
    eu_path: str = "/healthz",
    txt: str = "one",
) -> str:
    """Failover app (eu, then us) with one HTTP check per site; `extra` is appended at the top level."""
    return f"""
version: 1
site: {{name: eu}}
dns: {{listen: {listen}, lame_duck: 0s}}
zones:
  - origin: {ZONE}
    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]
    records: [{{name: info, type: TXT, value: "{txt}"}}]
checks:
  eu: {{type: http, port: {eu_port}, path: {eu_path}, expect_status: [200], interval: {interval},
        timeout: {timeout}, rise: 1, fall: 2}}
  us: {{type: http, port: {us_port}, path: /healthz, expect_status: [200], interval: {interval},
        timeout: {timeout}, rise: 1, fall: 2}}
services:
  - name: {APP}
    policy: failover
    failover_order: [eu, us]
    endpoints:
      - {{address: 192.0.2.10, site: eu, check: eu, probe_address: 127.0.0.1}}
      - {{address: 198.51.100.10, site: us, check: us, probe_address: 127.0.0.1}}
  - name: drained.{ZONE}
    check: none
    endpoints:
      - {{address: 192.0.2.99, admin: down}}
      - {{address: 192.0.2.98}}
{extra}
"""


async def addresses(port: int, name: str = APP, host: str = "127.0.0.1") -> list[str]:
    query = dns.message.make_query(name, dns.rdatatype.A)
    reply = await dns.asyncquery.udp(query, host, port=port, timeout=2.0)
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0, step: float = 0.005) -> float:
    """Wait until `condition()`; the time.monotonic() at which it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(step)
    return time.monotonic()


def dns_port(bound: list[str]) -> int:
    return int(bound[0].rsplit(":", 1)[1])


class _Handler(http.server.BaseHTTPRequestHandler):
    server: ThreadedBackend

    def do_GET(self) -> None:
        if self.path == "/load":  # load feedback (docs/policies/load.md): the figure the backend reports
            self.server.load_fetches += 1
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.server.load)))
            self.end_headers()
            self.wfile.write(self.server.load)
            return
        healthy = self.server.healthy
        body = b"ok\n" if healthy else b"failing\n"
        self.send_response(200 if healthy else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class ThreadedBackend(http.server.ThreadingHTTPServer):
    """An HTTP backend in a thread (for tests that run gslbd as a process): GET anything -> 200 while
    `healthy`, else 503; GET /load -> 200 with the body `load` (a load figure, or garbage)."""

    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)  # a port again: a backend that came back
        self.healthy = True
        self.load = b"0"
        self.load_fetches = 0  # GET /load served
        self.port: int = self.server_address[1]
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class TcpBackend:
    """A TCP backend in a thread that accepts and closes connections (what a `type: tcp` check without
    send/expect needs); `stop()` closes its port (connections are refused), `start()` opens the same
    port again."""

    def __init__(self) -> None:
        self.port = 0
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.start()

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(64)
        self.port = sock.getsockname()[1]
        self._sock = sock
        self._thread = threading.Thread(target=self._accept, args=(sock,), daemon=True)
        self._thread.start()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:  # closed by stop()
                return
            conn.close()

    def stop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def http_get(url: str, token: str | None = None, method: str = "GET") -> tuple[int, Any]:
    """(status, parsed JSON body or text) of a request; HTTP errors are returned, not raised."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            status, raw, kind = response.status, response.read(), response.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        status, raw, kind = exc.code, exc.read(), exc.headers.get_content_type()
    text = raw.decode()
    return status, json.loads(text) if kind == "application/json" else text


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(step)
