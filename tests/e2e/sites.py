"""A lab of three gslbd sites on 127.0.0.2-4 with real HTTP backends and cuttable links between them.

    eu 127.0.0.2   us 127.0.0.3   ap 127.0.0.4        (one DNS port P, the same on every host)

Sites reach each other only through relays, one per direction: site `a` is configured to query peer `b`
at 127.0.<a>.<b>:P (eu=2, us=3, ap=4), and that relay forwards to b's real address from 127.0.<b>.<a>,
the address b has configured for a (so a NOTIFY from a arrives at b from an address b knows as a's
nameserver). `cut(a, b)` makes the relay drop traffic silently (a cannot learn from b, as with a
firewall that drops), `heal(a, b)` restores it. Only loopback addresses are involved.

Backends are small HTTP servers, one per endpoint address (127.0.1<site>.<n>, e.g. 127.0.12.1 for eu),
all on one port Q: `GET /healthz` answers 200 while up and 503 while failing; `dead` closes the socket
(connections refused). Relays and backends run on one asyncio loop in a background thread.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
from gslbd_harness import Running, free_port, gslbd_command, wait_until_answering

T = TypeVar("T")

ZONE = "gslb.example.com."
SITES = ("eu", "us", "ap")
INDEX = {"eu": 2, "us": 3, "ap": 4}


def site_host(site: str) -> str:
    return f"127.0.0.{INDEX[site]}"


def relay_host(src: str, dst: str) -> str:
    """Where `src` queries `dst` (the relay), and the address `dst` sees `src`'s traffic come from."""
    return f"127.0.{INDEX[src]}.{INDEX[dst]}"


def backend_address(site: str, n: int) -> str:
    return f"127.0.1{INDEX[site]}.{n}"


@dataclass(frozen=True)
class Timing:
    """The lab's clocks: short, so a whole scenario takes seconds."""

    peers_interval: float = 1.0
    peers_timeout: float = 0.3
    stale_after: float = 4.0
    check_interval: float = 0.5
    check_timeout: float = 0.3
    notify: bool = True


def _yaml_seconds(value: float) -> str:
    return f"{round(value * 1000)}ms"


def site_config(site: str, port: int, check_port: int, services: str, timing: Timing) -> str:
    """The config of one site: the same zone, checks and services everywhere; peers via the relays."""
    ns = "\n".join(f"      - {{name: gslb-ns-{s}-gslb.example.com., address: {site_host(s)}}}" for s in SITES)
    peers = "\n".join(
        f'    - {{name: {p}, nameservers: ["{relay_host(site, p)}:{port}"]}}' for p in SITES if p != site
    )
    sites = "\n".join(f"  {s}: {{locality: {{region: region-{s}}}}}" for s in SITES)
    return f"""\
version: 1
site: {{name: {site}, locality: {{region: region-{site}}}}}
dns: {{listen: ["{site_host(site)}:{port}"], lame_duck: 0s}}
zones:
  - origin: {ZONE}
    ttl: 5
    nameservers:
{ns}
sites:
{sites}
checks:
  web: {{type: http, port: {check_port}, path: /healthz, interval: {_yaml_seconds(timing.check_interval)},
         timeout: {_yaml_seconds(timing.check_timeout)}, rise: 1, fall: 1}}
services:
{services}
peers:
  interval: {_yaml_seconds(timing.peers_interval)}
  timeout: {_yaml_seconds(timing.peers_timeout)}
  stale_after: {_yaml_seconds(timing.stale_after)}
  notify: {"true" if timing.notify else "false"}
  sites:
{peers}
"""


class _Backend:
    """One HTTP endpoint: up (200), failing (503) or dead (not listening)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.mode = "up"
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def set_mode(self, mode: str) -> None:
        self.mode = mode
        if mode == "dead":
            await self.close()
        else:
            await self.listen()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head:
                    break
                ok = self.mode == "up"
                body = b"ok" if ok else b"failing"
                status = b"200 OK" if ok else b"503 Service Unavailable"
                writer.write(
                    b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\nContent-Length: "
                    + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
                )  # fmt: skip
                await writer.drain()
                break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


class _UdpUpstream(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if not self.reply.done():
            self.reply.set_result(data)

    def error_received(self, exc: Exception) -> None:
        if not self.reply.done():
            self.reply.set_exception(exc)


class _Relay(asyncio.DatagramProtocol):
    """UDP and TCP from (listen_host, port) to (target_host, port), sent from source_host."""

    def __init__(self, listen_host: str, target_host: str, source_host: str, port: int) -> None:
        self.listen_host, self.target_host, self.source_host, self.port = (
            listen_host,
            target_host,
            source_host,
            port,
        )
        self.dropping = False
        self.transport: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Future[None]] = set()
        self.forwarded = 0
        self.dropped = 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_datagram_endpoint(lambda: self, local_addr=(self.listen_host, self.port))
        self._tcp = await asyncio.start_server(
            self._serve_tcp, self.listen_host, self.port, reuse_address=True
        )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if self.dropping:
            self.dropped += 1
            return
        self.forwarded += 1
        task = asyncio.ensure_future(self._forward(data, addr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forward(self, data: bytes, addr: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, upstream = await loop.create_datagram_endpoint(
                _UdpUpstream, local_addr=(self.source_host, 0), remote_addr=(self.target_host, self.port)
            )
        except OSError:
            return
        try:
            transport.sendto(data)
            reply = await asyncio.wait_for(upstream.reply, 5.0)
            if not self.dropping and self.transport is not None:
                self.transport.sendto(reply, addr)
        except (TimeoutError, OSError):
            pass
        finally:
            transport.close()

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._conns.add(writer)
        try:
            if self.dropping:
                await reader.read()  # swallow until the client gives up
                return
            up_reader, up_writer = await asyncio.open_connection(
                self.target_host, self.port, local_addr=(self.source_host, 0)
            )
            self._conns.add(up_writer)
            await asyncio.gather(_pipe(reader, up_writer, self), _pipe(up_reader, writer, self))
        except OSError:
            pass
        finally:
            self._conns.discard(writer)
            writer.close()

    def set_dropping(self, dropping: bool) -> None:
        self.dropping = dropping
        if dropping:
            for conn in list(self._conns):
                conn.close()
            self._conns.clear()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.transport is not None:
            self.transport.close()
        if self._tcp is not None:
            self._tcp.close()
        for conn in list(self._conns):
            conn.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, relay: _Relay) -> None:
    try:
        while data := await reader.read(65536):
            if relay.dropping:
                break
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


@dataclass
class Lab:
    """Three gslbd sites, their backends and the relays between them. Use `with Lab(...) as lab:`."""

    workdir: Path
    services: str  # the `services:` items (YAML, indented two spaces), `check: web` for HTTP checks
    backends: Iterable[str]  # every endpoint address that gets an HTTP backend
    timing: Timing = field(default_factory=Timing)
    port: int = 0
    check_port: int = 0
    running: dict[str, Running] = field(default_factory=dict)
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _backends: dict[str, _Backend] = field(default_factory=dict)
    _relays: dict[tuple[str, str], _Relay] = field(default_factory=dict)

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> Lab:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop.run_forever, name="lab-loop", daemon=True)
        self._thread.start()
        addresses = list(dict.fromkeys(self.backends))
        relay_hosts = [relay_host(a, b) for a in SITES for b in SITES if a != b]
        self.port = free_port(tuple(site_host(s) for s in SITES) + tuple(relay_hosts))
        self.check_port = free_port(tuple(addresses)) if addresses else 0
        for address in addresses:
            self._backends[address] = _Backend(address, self.check_port)
            self._run(self._backends[address].listen())
        for a in SITES:
            for b in SITES:
                if a != b:
                    relay = _Relay(relay_host(a, b), site_host(b), relay_host(b, a), self.port)
                    self._relays[(a, b)] = relay
                    self._run(relay.start())
        procs = [self._spawn(site) for site in SITES]
        for server in procs:
            wait_until_answering(server)

    def close(self) -> None:
        for server in self.running.values():
            server.kill()
        self.running.clear()
        if self._thread is not None:
            for backend in self._backends.values():
                self._run(backend.close())
            for relay in self._relays.values():
                self._run(relay.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._thread = None
        if not self._loop.is_running():
            self._loop.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def _spawn(self, site: str) -> Running:
        path = self.workdir / f"{site}.yaml"
        path.write_text(site_config(site, self.port, self.check_port, self.services, self.timing))
        log_path = self.workdir / f"{site}.log"
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                gslbd_command("serve", "--config", str(path), "--log-level", "info"),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = Running(proc, self.port, (site_host(site),), path, log_path, ZONE)
        self.running[site] = server
        return server

    # -- sites ---------------------------------------------------------------------------------------
    def stop_site(self, site: str) -> None:
        """Kill the site's process: its address stops answering (queries to it time out or fail)."""
        self.running.pop(site).kill()

    def start_site(self, site: str) -> None:
        """Start a stopped site again on the same address and port; returns once it answers."""
        wait_until_answering(self._spawn(site))

    def log(self, site: str) -> str:
        return (self.workdir / f"{site}.log").read_text(errors="replace")

    # -- links ---------------------------------------------------------------------------------------
    def cut(self, src: str, dst: str) -> None:
        """`src` can no longer reach `dst` (its queries and NOTIFYs to dst are dropped)."""
        self._loop.call_soon_threadsafe(self._relays[(src, dst)].set_dropping, True)

    def heal(self, src: str, dst: str) -> None:
        self._loop.call_soon_threadsafe(self._relays[(src, dst)].set_dropping, False)

    def isolate(self, site: str) -> None:
        """Cut every link to and from `site`."""
        for other in SITES:
            if other != site:
                self.cut(site, other)
                self.cut(other, site)

    def heal_all(self) -> None:
        for a, b in self._relays:
            self.heal(a, b)

    # -- backends ------------------------------------------------------------------------------------
    def set_backend(self, address: str, mode: str) -> None:
        """mode: up (200), failing (503) or dead (not listening)."""
        self._run(self._backends[address].set_mode(mode))

    def revive_all(self) -> None:
        for address in self._backends:
            self.set_backend(address, "up")

    # -- DNS -----------------------------------------------------------------------------------------
    def ask(self, site: str, name: str, rtype: str = "A", timeout: float = 1.0) -> dns.message.Message | None:
        query = dns.message.make_query(name, dns.rdatatype.from_text(rtype))
        query.flags &= ~dns.flags.RD
        try:
            return dns.query.udp(query, site_host(site), port=self.port, timeout=timeout)
        except (dns.exception.DNSException, OSError):
            return None

    def answers(self, site: str, name: str, rtype: str = "A") -> frozenset[str] | None:
        """The addresses `site` answers for `name` (empty for NXDOMAIN/NODATA); None when it is silent
        or fails (SERVFAIL, REFUSED)."""
        reply = self.ask(site, name, rtype)
        if reply is None or reply.rcode() not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
            return None
        want = dns.rdatatype.from_text(rtype)
        return frozenset(r.to_text() for rrset in reply.answer if rrset.rdtype == want for r in rrset)

    def everywhere(self, name: str, rtype: str = "A") -> dict[str, frozenset[str] | None]:
        """What every running site answers for `name`."""
        return {site: self.answers(site, name, rtype) for site in SITES if site in self.running}


def eventually(check: Callable[[], T], expect: T, timeout: float, step: float = 0.02) -> float:
    """Poll `check()` until it equals `expect`; the seconds it took. Fails with the last value."""
    start = time.monotonic()
    last: Any = None
    while True:
        last = check()
        if last == expect:
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not {expect!r} within {timeout}s; last {last!r}")
        time.sleep(step)


def holds(check: Callable[[], T], expect: T, duration: float, step: float = 0.05) -> None:
    """`check()` equals `expect` for the whole `duration` (sampled)."""
    end = time.monotonic() + duration
    while time.monotonic() < end:
        value = check()
        assert value == expect, f"expected {expect!r} to hold for {duration}s; got {value!r}"
        time.sleep(step)


# -- the catalogue's services ------------------------------------------------------------------------
# Every service has its own backends, so a scenario that kills one never disturbs another.
RR = f"rr.{ZONE}"
FO = f"fo.{ZONE}"
W = f"w.{ZONE}"

RR_EU = frozenset({backend_address("eu", 1), backend_address("eu", 2)})
RR_US = frozenset({backend_address("us", 1), backend_address("us", 2)})
RR_AP = frozenset({backend_address("ap", 1)})
RR_ALL = RR_EU | RR_US | RR_AP
FO_EU, FO_US, FO_AP = (frozenset({backend_address(s, 11)}) for s in SITES)
W_EU, W_US, W_AP = (frozenset({backend_address(s, 21)}) for s in SITES)
WEIGHTS = {"eu": 60, "us": 30, "ap": 10}


def _endpoints(addresses: dict[str, frozenset[str]]) -> str:
    return "\n".join(
        f"      - {{address: {a}, site: {site}}}" for site, group in addresses.items() for a in sorted(group)
    )


SERVICES = f"""\
  - name: {RR}
    policy: round_robin
    check: web
    endpoints:
{_endpoints({"eu": RR_EU, "us": RR_US, "ap": RR_AP})}
  - name: {FO}
    policy: failover
    failover_order: [eu, us, ap]
    check: web
    endpoints:
{_endpoints({"eu": FO_EU, "us": FO_US, "ap": FO_AP})}
  - name: {W}
    policy: weighted
    weights: {{eu: {WEIGHTS["eu"]}, us: {WEIGHTS["us"]}, ap: {WEIGHTS["ap"]}}}
    check: web
    endpoints:
{_endpoints({"eu": W_EU, "us": W_US, "ap": W_AP})}
"""
BACKENDS = sorted(RR_ALL | FO_EU | FO_US | FO_AP | W_EU | W_US | W_AP)
BASELINE = {RR: RR_ALL, FO: FO_EU}


def same_everywhere(value: frozenset[str]) -> dict[str, frozenset[str] | None]:
    return dict.fromkeys(SITES, value)


def converge(lab: Lab, expected: dict[str, dict[str, frozenset[str] | None]], timeout: float) -> float:
    """Wait until every site answers `expected[name][site]` for every name; the seconds it took."""

    def now() -> dict[str, dict[str, frozenset[str] | None]]:
        return {name: lab.everywhere(name) for name in expected}

    return eventually(now, expected, timeout)


def baseline(lab: Lab, timeout: float = 15.0) -> float:
    """Wait until every site answers the healthy picture (the union for rr, eu for fo)."""
    return converge(lab, {name: same_everywhere(v) for name, v in BASELINE.items()}, timeout)
