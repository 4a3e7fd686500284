"""What one peer costs per polling interval: the bulk exchange channel (SOA serial + IXFR) against per-name
polling (A and AAAA of every service's localtargets name), with real gslbd processes.

Two sites on loopback: `pub` (127.0.0.2) publishes N services (one IPv4 endpoint each) and `poll`
(127.0.0.3) learns them. Everything `poll` sends to `pub` goes through a counting proxy in this process
(127.0.0.5, UDP and TCP; it connects onwards from 127.0.0.6, which `pub` lists as its peer's nameserver
where nothing listens, so that `pub`'s own polls of `poll` cost nothing and transfers are allowed), which
counts queries (UDP datagrams and TCP messages towards `pub`) and bytes both ways. Each interval
the bench makes `--changes` admin changes at `pub` (an endpoint down, or back up) through its API. NOTIFY
is off in the measured runs, so every figure is polling cost; `--notify` adds a run with NOTIFY on (the
NOTIFYs go straight from pub to poll and are not counted by the proxy; every change then causes a poll).

    python bench/exchange_bench.py --services 100000            # the issue's scale (slow to start)
    python bench/exchange_bench.py --services 2000 --intervals 4

Printed: a table of queries, bytes and the poller's CPU per interval per peer for each mode, the ratio
per-name / bulk in the same invocation, and whether `poll` ended with `pub`'s publication (it must).
Exit status 0 after a valid measurement, 2 when a site did not start or did not converge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import dns.message
import dns.query
import dns.rdatatype

PUB, POLL, PROXY, RELAY = "127.0.0.2", "127.0.0.3", "127.0.0.5", "127.0.0.6"
ZONE = "bench.test."
TOKEN = "bench-token"


def free_port(hosts: tuple[str, ...]) -> int:
    for _ in range(200):
        port = random.randrange(20000, 60000)
        try:
            for host in hosts:
                for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                    with socket.socket(socket.AF_INET, kind) as s:
                        s.bind((host, port))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port")


def address(n: int) -> str:
    return f"10.{n // 62500}.{n // 250 % 250}.{n % 250 + 1}"


def services_yaml(count: int) -> str:
    return "\n".join(
        f"  - {{name: s{n}, endpoints: [{{address: {address(n)}, site: pub}}]}}" for n in range(count)
    )


def site_config(
    site: str,
    port: int,
    api_port: int,
    peer: str,
    peer_servers: list[str],
    services: str,
    *,
    transfer: bool,
    notify: bool,
    interval: float,
) -> str:
    host = PUB if site == "pub" else POLL
    servers = ", ".join(f'"{s}"' for s in peer_servers)
    return f"""\
site: {{name: {site}}}
dns: {{listen: ["{host}:{port}"], lame_duck: 0s}}
api: {{listen: "{host}:{api_port}", token: {TOKEN}}}
zones:
  - origin: {ZONE}
    ttl: 30
    nameservers:
      - {{name: ns1.{ZONE}, address: {PUB}}}
services:
{services}
peers:
  interval: {interval:g}s
  timeout: {min(1.0, interval / 2):g}s
  stale_after: {max(300.0, interval * 10):g}s
  notify: {"true" if notify else "false"}
  transfer: {"true" if transfer else "false"}
  sites:
    - {{name: {peer}, nameservers: [{servers}]}}
"""


# -- the counting proxy ---------------------------------------------------------------------------------


@dataclass
class Counts:
    queries: int = 0
    sent: int = 0  # bytes towards pub
    received: int = 0  # bytes from pub


class Proxy:
    """UDP and TCP from PROXY:port to PUB:port, from POLL's address, counting what goes through."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.counts = Counts()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def take(self) -> Counts:
        with self._lock:
            counts, self.counts = self.counts, Counts()
        return counts

    def _add(self, queries: int = 0, sent: int = 0, received: int = 0) -> None:
        with self._lock:
            self.counts.queries += queries
            self.counts.sent += sent
            self.counts.received += received

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        proxy = self

        class Upstream(asyncio.DatagramProtocol):
            def __init__(self, front: asyncio.DatagramTransport, client: tuple[str, int]) -> None:
                self.front, self.client = front, client

            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                proxy._add(received=len(data))
                self.front.sendto(data, self.client)

        class Front(asyncio.DatagramProtocol):
            def __init__(self) -> None:
                self.transport: asyncio.DatagramTransport | None = None
                self.ups: dict[tuple[str, int], asyncio.DatagramTransport] = {}
                self.waiting: dict[tuple[str, int], list[bytes]] = {}
                self.tasks: set[asyncio.Task[None]] = set()

            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                self.transport = transport  # type: ignore[assignment]

            def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
                proxy._add(queries=1, sent=len(data))
                up = self.ups.get(addr)
                if up is not None:
                    up.sendto(data)
                    return
                waiting = self.waiting.get(addr)
                if waiting is not None:  # the upstream socket is being opened
                    waiting.append(data)
                    return
                self.waiting[addr] = [data]
                task = loop.create_task(self._open(addr))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

            async def _open(self, addr: tuple[str, int]) -> None:
                assert self.transport is not None
                up, _ = await loop.create_datagram_endpoint(
                    lambda: Upstream(self.transport, addr),  # type: ignore[arg-type]
                    local_addr=(RELAY, 0),
                    remote_addr=(PUB, proxy.port),
                )
                self.ups[addr] = up
                for data in self.waiting.pop(addr):
                    up.sendto(data)

        await loop.create_datagram_endpoint(Front, local_addr=(PROXY, self.port))

        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool) -> None:
            buf = b""
            try:
                while data := await reader.read(65536):
                    if upstream:
                        buf += data
                        while len(buf) >= 2 and len(buf) >= 2 + int.from_bytes(buf[:2], "big"):
                            proxy._add(queries=1)
                            buf = buf[2 + int.from_bytes(buf[:2], "big") :]
                        proxy._add(sent=len(data))
                    else:
                        proxy._add(received=len(data))
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection(PUB, self.port, local_addr=(RELAY, 0))
            await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

        await asyncio.start_server(accept, PROXY, self.port)


# -- processes -------------------------------------------------------------------------------------------


class Site:
    def __init__(self, name: str, config: str, workdir: Path, host: str, port: int, api_port: int) -> None:
        self.name, self.host, self.port, self.api = name, host, port, f"http://{host}:{api_port}"
        path = workdir / f"{name}.yaml"
        path.write_text(config)
        self.log = workdir / f"{name}.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gslbd", "serve", "--config", str(path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def ask(self, name: str) -> set[str]:
        query = dns.message.make_query(name, dns.rdatatype.A)
        try:
            reply = dns.query.udp(query, self.host, port=self.port, timeout=2)
        except Exception:
            return set()
        return {rd.to_text() for rrset in reply.answer for rd in rrset}

    def answering(self) -> bool:
        try:
            dns.query.udp(
                dns.message.make_query(ZONE, dns.rdatatype.SOA), self.host, port=self.port, timeout=1
            )
        except Exception:
            return False
        return True

    def wait(self, check: object, timeout: float, what: str) -> float:
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited; see {self.log}")
            if check():  # type: ignore[operator]
                return time.monotonic() - began
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}: {what} not within {timeout:g}s; see {self.log}")

    def cpu(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def admin(self, service: str, addr: str, state: str) -> None:
        request = urllib.request.Request(
            f"{self.api}/api/v1/services/{service}/endpoints/{addr}/admin",
            data=json.dumps({"state": state}).encode(),
            method="PUT",
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30):
            pass

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@dataclass
class Row:
    mode: str
    queries: float
    sent: float
    received: float
    poller_cpu: float
    publisher_cpu: float
    converged: bool


def measure(
    mode: str,
    pub: Site,
    poll: Site,
    proxy: Proxy,
    services: int,
    intervals: int,
    changes: int,
    interval: float,
    rng: random.Random,
    learn_timeout: float,
) -> Row:
    last = f"s{services - 1}.{ZONE}"
    began = time.monotonic()
    try:
        poll.wait(
            lambda: poll.ask(last) == {address(services - 1)}, learn_timeout, "learning pub's endpoints"
        )
        learned = True
        print(
            f"  {mode}: poll learned every service {time.monotonic() - began:.0f} s after it answered",
            flush=True,
        )
    except TimeoutError:  # per-name polls that never complete within an interval: measure what they cost
        learned = False
        print(f"  {mode}: poll did not learn every service within {learn_timeout:g} s", flush=True)
    time.sleep(interval * 1.5)  # one whole poll after learning (the first one may be a full transfer)
    proxy.take()
    cpu_poll, cpu_pub = poll.cpu(), pub.cpu()
    began = time.monotonic()
    down: list[int] = []
    touched: set[int] = set()
    for _ in range(intervals):
        start = time.monotonic()
        for k in range(changes):
            if down and (len(down) >= changes or k % 2):
                n = down.pop(0)
                pub.admin(f"s{n}.{ZONE}", address(n), "obey")
            else:
                n = rng.randrange(services)
                pub.admin(f"s{n}.{ZONE}", address(n), "down")
                down.append(n)
            touched.add(n)
        time.sleep(max(0.0, start + interval - time.monotonic()))
    elapsed = time.monotonic() - began
    counts = proxy.take()
    per = interval / elapsed
    cpu = (poll.cpu() - cpu_poll) * per, (pub.cpu() - cpu_pub) * per
    # within one more interval `poll` must answer exactly what pub publishes for every service changed
    converged = learned
    if learned:
        try:
            poll.wait(
                lambda: all(
                    poll.ask(f"s{n}.{ZONE}") == (set() if n in down else {address(n)}) for n in touched
                ),
                interval * 3,
                "converging",
            )
        except TimeoutError:
            converged = False
    return Row(
        mode, counts.queries * per, counts.sent * per, counts.received * per, cpu[0], cpu[1], converged
    )


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="exchange-bench-"))
    port = free_port((PUB, POLL, PROXY))
    api_pub, api_poll = free_port((PUB,)), free_port((POLL,))
    services = services_yaml(args.services)
    proxy = Proxy(port)
    proxy.start()
    rng = random.Random(args.seed)
    modes = [("bulk (SOA + IXFR)", True, False), ("per-name", False, False)]
    if args.notify:
        modes.append(("bulk + NOTIFY", True, True))
    pub_config = site_config(
        "pub",
        port,
        api_pub,
        "poll",
        [f"{RELAY}:{port}"],
        services,
        transfer=True,
        notify=False,
        interval=args.interval,
    )
    rows: list[Row] = []
    began = time.monotonic()
    pub = Site("pub", pub_config, workdir, PUB, port, api_pub)
    poll: Site | None = None
    try:
        for index, (mode, transfer, notify) in enumerate(modes):
            servers = [f"{PROXY}:{port}"] + ([f"{PUB}:{port}"] if notify else [])
            text = site_config(
                "poll",
                port,
                api_poll,
                "pub",
                servers,
                services,
                transfer=transfer,
                notify=False,
                interval=args.interval,
            )
            if notify:  # pub must send NOTIFY: restart it with notify on
                pub.stop()
                notifying = pub_config.replace("notify: false", "notify: true").replace(
                    f'"{RELAY}:{port}"', f'"{RELAY}:{port}", "{POLL}:{port}"'
                )
                pub = Site(
                    "pub",
                    notifying,
                    workdir,
                    PUB,
                    port,
                    api_pub,
                )
                pub.wait(pub.answering, 3600, "answering")
            poll = Site("poll", text, workdir, POLL, port, api_poll)  # starts while pub does, the first time
            try:
                if index == 0:
                    pub.wait(pub.answering, 7200, "answering")
                    print(
                        f"pub answers {args.services} services after {time.monotonic() - began:.0f} s",
                        flush=True,
                    )
                poll.wait(poll.answering, 7200, "answering")
                rows.append(
                    measure(
                        mode,
                        pub,
                        poll,
                        proxy,
                        args.services,
                        args.intervals,
                        args.changes,
                        args.interval,
                        rng,
                        args.learn_timeout,
                    )
                )
                print(f"  measured {mode}", flush=True)
            finally:
                poll.stop()
    except (TimeoutError, SystemExit) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        pub.stop()
    print()
    print(
        f"{args.services} services, {args.changes} changes per interval of {args.interval:g} s, one peer, "
        f"{args.intervals} intervals"
    )
    head = (
        f"{'mode':<20} {'queries/interval':>17} {'bytes sent':>12} {'bytes received':>15} "
        f"{'poller CPU s':>13} {'pub CPU s':>10}  converged"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.mode:<20} {r.queries:>17,.0f} {r.sent:>12,.0f} {r.received:>15,.0f} {r.poller_cpu:>13.3f} "
            f"{r.publisher_cpu:>10.3f}  {'yes' if r.converged else 'NO'}"
        )
    by_mode = {r.mode: r for r in rows}
    per, bulk = by_mode.get("per-name"), by_mode.get("bulk (SOA + IXFR)")
    if per is not None and bulk is not None and bulk.queries:
        print(
            f"per-name / bulk: queries x{per.queries / bulk.queries:,.0f}, "
            f"bytes x{(per.sent + per.received) / max(1.0, bulk.sent + bulk.received):,.0f}, "
            f"poller CPU x{per.poller_cpu / max(1e-3, bulk.poller_cpu):,.1f}"
        )
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if all(r.converged for r in rows) else 2


def wire_figures(count: int, changes: int) -> int:
    """The channel's own cost at `count` services, in this process (no YAML, no answer table): the bytes
    of a SOA poll, of the first AXFR and of an IXFR of `changes` changes, and the CPU each costs the
    serving and the reading side (ExchangeZones and the poller's transfer reader, as gslbd runs them)."""
    from dataclasses import replace

    from gslbd.answer.exchange_names import localtargets_name
    from gslbd.config import load_config_text
    from gslbd.exchange.xfrclient import _Builder
    from gslbd.exchange.xfrserve import ExchangeZones
    from gslbd.exchange.xfrwire import AXFR, IXFR, soa_query, transfer_query
    from gslbd.model.service import Endpoint, Service
    from gslbd.types import EndpointKind

    base = load_config_text(
        site_config(
            "pub",
            53,
            8080,
            "poll",
            [f"{RELAY}:53"],
            services_yaml(1),
            transfer=True,
            notify=False,
            interval=5.0,
        )
    )
    services = tuple(
        Service(
            f"s{n}.{ZONE}",
            ZONE,
            f"s{n}",
            endpoints=(Endpoint(f"s{n}.{ZONE}", address(n), EndpointKind.IPV4, "pub"),),
        )
        for n in range(count)
    )
    config = replace(base, services=services)
    publication = {ZONE: {localtargets_name(s): (address(n),) for n, s in enumerate(services)}}
    wall = time.time()
    began = time.process_time()
    zones = ExchangeZones(config, publication, wall, lambda *a: None)
    build = time.process_time() - began
    apex = f"_gslbd-exchange-pub.{ZONE}"
    peer = int.from_bytes(socket.inet_aton(RELAY), "big")
    soa_q = soa_query(apex, 1)
    soa_a = zones.handle(soa_q, wall, peer, False, False) or b""

    def transfer(query: bytes, have: object) -> tuple[int, int, float, float, object]:
        t0 = time.process_time()
        stream = zones.handle(query, wall, peer, False, True) or b""
        t1 = time.process_time()
        builder = _Builder(apex, ZONE, have)  # type: ignore[arg-type]
        pos = messages = 0
        while pos < len(stream):
            size = int.from_bytes(stream[pos : pos + 2], "big")
            builder.feed(stream[pos + 2 : pos + 2 + size], int.from_bytes(query[:2], "big"), None)
            pos += 2 + size
            messages += 1
        t2 = time.process_time()
        return len(stream), messages, t1 - t0, t2 - t1, builder.result()

    axfr = transfer(transfer_query(apex, AXFR, 2), None)
    copy = axfr[4]
    rng = random.Random(1)
    changed = {}
    for n in rng.sample(range(count), changes):
        changed[localtargets_name(services[n])] = ()
    now = {ZONE: {k: v for k, v in publication[ZONE].items() if k not in changed}}
    began = time.process_time()
    zones.update(now, [ZONE], wall + 5)
    journal = time.process_time() - began
    ixfr = transfer(transfer_query(apex, IXFR, 3, copy.serial), copy)  # type: ignore[attr-defined]
    print(f"{count:,} services, in process (ExchangeZones + the poller's transfer reader)")
    print(
        f"  journal and zone built:            {build:.2f} s CPU; "
        f"{changes} changes recorded in {journal * 1000:.1f} ms"
    )
    print(f"  SOA poll:                          {len(soa_q)} + {len(soa_a)} bytes, 1 query")
    print(
        f"  first AXFR:                        {axfr[0]:,} bytes in {axfr[1]} messages; "
        f"server {axfr[2]:.2f} s, reader {axfr[3]:.2f} s CPU"
    )
    print(
        f"  IXFR of {changes} changes:              {ixfr[0]:,} bytes in {ixfr[1]} message(s); "
        f"server {ixfr[2] * 1000:.1f} ms, reader {ixfr[3] * 1000:.1f} ms CPU"
    )
    print(f"  per-name polling would ask {2 * count + 1:,} questions per interval and peer")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--services", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=10, help="admin changes at pub per interval")
    parser.add_argument("--interval", type=float, default=5.0, help="peers.interval, seconds")
    parser.add_argument("--intervals", type=int, default=4, help="intervals measured per mode")
    parser.add_argument("--notify", action="store_true", help="add a run with NOTIFY on")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--wire-only",
        action="store_true",
        help="measure the channel's messages and CPU in this process only (no gslbd processes; any scale)",
    )
    parser.add_argument(
        "--learn-timeout",
        type=float,
        default=600.0,
        help="seconds to wait for the poller to learn every service",
    )
    args = parser.parse_args()
    if args.wire_only:
        return wire_figures(args.services, args.changes)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
