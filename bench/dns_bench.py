#!/usr/bin/env python3
"""Server CPU per answered DNS query: gslbd against gdnsd and Knot DNS, two C authoritative servers.

Run on demand, not by the test suite (stdlib only; needs gdnsd, knotd, dnsperf, dig and taskset on PATH):

    /tmp/venv/bin/python bench/dns_bench.py --seconds 10 --json /tmp/bench.json
    /tmp/venv/bin/python bench/dns_bench.py --scaling          # also: q/s by dns.workers, dns.threads 1, 2
    /tmp/venv/bin/python bench/dns_bench.py --dnssec           # gslbd signed vs unsigned, DO queries

`--dnssec` (issue 11) measures gslbd against itself: the same config unsigned and with the zone signed
(a key made by `gslbd dnssec keygen`), every query with DO set (dnsperf -D), end to end through the
listeners; the ratio is signed / unsigned CPU per answered query (target <= 1.3 for rr, geo and nx).

The servers serve the same names under bench.example. and run on 127.0.0.1 free ports, pinned to one CPU
(--server-cpus, default 1) while dnsperf runs on another (--client-cpu, default 0). gdnsd answers with its
own plugins where it has one (weighted, simplefo, geoip with `nets`), Knot from a static zone. For every
scenario each server first gets an unthrottled run (dnsperf as fast as one thread goes); then all are
measured at one fixed rate, a share (--load) of the slowest unthrottled rate seen, so that they do equal
work without being overloaded. The figure is the server's CPU time (all threads and child processes)
divided by the queries dnsperf saw answered. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ORIGIN = "bench.example."
ADDRESSES = ("192.0.2.1", "192.0.2.2", "192.0.2.3")
# Targets of issue 13: gslbd CPU per answered query at most this many times the reference server's.
TARGETS = {
    "rr": ("gdnsd", 1.15),
    "nx": ("gdnsd", 1.15),
    "wt": ("gdnsd", 1.3),
    "geo": ("gdnsd", 1.3),
    "hash": ("gdnsd", 1.3),
    "tcp": ("knot", 1.5),
}
# EDNS Client Subnet (option 8): family 1 (IPv4), source /24, scope 0, address 10.1.0 (site eu).
ECS_HEX = "000118000a0100"
# --dnssec: signed gslbd CPU per answered DO query at most this many times unsigned gslbd's.
DNSSEC_TARGETS = {"rr": ("gslbd", 1.3), "geo": ("gslbd", 1.3), "nx": ("gslbd", 1.3)}
NX_NAMES = 20_000  # distinct random names of the NXDOMAIN flood
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """The benchmark could not produce a valid figure (a server did not start, dnsperf lost queries...)."""


@dataclass(frozen=True)
class Scenario:
    key: str
    policy: str
    dnsperf_args: tuple[str, ...] = ()
    dig_args: tuple[str, ...] = ()
    rcode: str = "NOERROR"
    name: str = ""  # the name asked (default: the key)

    @property
    def qname(self) -> str:
        return f"{self.name or self.key}.{ORIGIN}"

    def queries(self) -> str:
        """dnsperf's query file."""
        if self.key == "nx":
            rng = random.Random(13)
            letters = "abcdefghijklmnopqrstuvwxyz0123456789"
            lines = (
                "".join(rng.choice(letters) for _ in range(12)) + f".{ORIGIN} A" for _ in range(NX_NAMES)
            )
            return "\n".join(lines) + "\n"
        return f"{self.qname} A\n"


ECS = ("-E", f"8:{ECS_HEX}")
SCENARIOS: tuple[Scenario, ...] = (
    Scenario("rr", "round_robin"),
    Scenario("wt", "weighted"),
    Scenario("fo", "failover"),
    Scenario("geo", "geo + ECS", ECS, ("+subnet=10.1.0.0/24",)),
    Scenario("hash", "hash + ECS", ECS, ("+subnet=10.1.0.0/24",)),
    Scenario("nx", "random NXDOMAIN", rcode="NXDOMAIN"),
    Scenario("tcp", "rr over TCP", ("-m", "tcp"), ("+tcp",), name="rr"),
)
NAMES = ("rr", "wt", "fo", "geo", "hash")
SCALING_SHAPES = ((1, 1), (1, 2), (2, 1), (2, 2))  # (dns.workers, dns.threads) of --scaling

GSLBD_CONFIG = """\
version: 1
dns: {{listen: ["127.0.0.1:{port}"], workers: {workers}}}
zones:
  - origin: bench.example.
    nameservers: [{{name: ns1.bench.example., address: 127.0.0.1}}]
services:
  - {{name: rr, policy: round_robin, check: none, endpoints: [{{address: 192.0.2.1}}, {{address: 192.0.2.2}},
      {{address: 192.0.2.3}}]}}
  - {{name: wt, policy: weighted, check: none, endpoints: [{{address: 192.0.2.1, weight: 5}},
      {{address: 192.0.2.2, weight: 3}}, {{address: 192.0.2.3, weight: 2}}]}}
  - {{name: fo, policy: failover, check: none, failover_order: [eu, us], endpoints: [
      {{address: 192.0.2.1, site: eu}}, {{address: 192.0.2.2, site: us}}]}}
  - {{name: geo, policy: geo, check: none, endpoints: [{{address: 192.0.2.1, site: eu}},
      {{address: 192.0.2.2, site: us}}, {{address: 192.0.2.3, site: ap}}]}}
  - {{name: hash, policy: hash, check: none, endpoints: [{{address: 192.0.2.1}}, {{address: 192.0.2.2}},
      {{address: 192.0.2.3}}]}}
topology:
  networks: [{{cidr: 10.1.0.0/16, site: eu}}, {{cidr: 10.2.0.0/16, site: us}},
    {{cidr: 10.3.0.0/16, site: ap}}]
"""

KNOT_CONFIG = """\
server:
    rundir: "{dir}"
    listen: 127.0.0.1@{port}
    udp-workers: {workers}
    tcp-workers: 1
    background-workers: 1
database:
    storage: "{dir}"
log:
  - target: stderr
    any: warning
zone:
  - domain: bench.example.
    storage: "{dir}"
    file: "bench.example.zone"
"""

GDNSD_CONFIG = """\
options => {{
  listen => [ 127.0.0.1:{port} ]
  udp_threads => {workers}
  tcp_threads => 1
  run_dir => {dir}/run
  state_dir => {dir}/state
}}
plugins => {{
  weighted => {{
    service_types => up
    wt => {{ a = [ 192.0.2.1, 5 ], b = [ 192.0.2.2, 3 ], c = [ 192.0.2.3, 2 ] }}
  }}
  simplefo => {{
    service_types => up
    fo => {{ primary => 192.0.2.1, secondary => 192.0.2.2 }}
  }}
  geoip => {{
    maps => {{
      bench => {{
        datacenters => [ eu, us, ap ]
        nets => {{ 10.1.0.0/16 => eu, 10.2.0.0/16 => us, 10.3.0.0/16 => ap }}
      }}
    }}
    resources => {{
      geo => {{
        map => bench
        service_types => up
        dcmap => {{ eu => 192.0.2.1, us => 192.0.2.2, ap => 192.0.2.3 }}
      }}
    }}
  }}
}}
"""


def gdnsd_zone() -> str:
    """rr and hash static (gdnsd has no rendezvous hashing: hash+ECS is its static answer with ECS echoed)."""
    lines = [
        "$TTL 30",
        "@ SOA ns1 hostmaster 1 3600 600 86400 30",
        "@ NS ns1",
        "ns1 A 127.0.0.1",
        "wt DYNA weighted!wt",
        "fo DYNA simplefo!fo",
        "geo DYNA geoip!geo",
    ]
    lines += [f"{name} A {address}" for name in ("rr", "hash") for address in ADDRESSES]
    return "\n".join(lines) + "\n"


def knot_zone() -> str:
    lines = [
        f"$ORIGIN {ORIGIN}",
        "$TTL 30",
        "@ SOA ns1 hostmaster 1 3600 600 86400 30",
        "@ NS ns1",
        "ns1 A 127.0.0.1",
    ]
    lines += [f"{name} A {address}" for name in NAMES for address in ADDRESSES]
    return "\n".join(lines) + "\n"


def gslbd_key(keys: Path) -> str:
    """A key pair for ORIGIN made by `gslbd dnssec keygen` in `keys` (created): the name it printed."""
    keys.mkdir(exist_ok=True)
    made = subprocess.run(
        [sys.executable, "-m", "gslbd", "dnssec", "keygen", "--zone", ORIGIN, "--dir", str(keys)],
        capture_output=True,
        text=True,
        check=True,
    )
    return made.stdout.split()[0]


def free_port(taken: set[int]) -> int:
    """A loopback port free for both UDP and TCP, not in `taken`."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
                try:
                    tcp.bind(("127.0.0.1", port))
                except OSError:
                    continue
        if port not in taken:
            taken.add(port)
            return port
    raise BenchError("no free loopback port")


@dataclass(frozen=True)
class Cpu:
    """CPU seconds of a process tree: from /proc/PID/stat (clock ticks) and from schedstat (nanoseconds)."""

    ticks: float
    precise: float


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry))
    return kids


def process_tree(pid: int) -> list[int]:
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(_children(current))
    return tree


def cpu_of(pids: Sequence[int]) -> Cpu:
    ticks = 0
    nanos = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
            for task in Path(f"/proc/{pid}/task").iterdir():
                nanos += int((task / "schedstat").read_text().split()[0])
        except OSError:
            continue
    return Cpu(ticks / CLK_TCK, nanos / 1e9)


class Server:
    """One DNS server process (with its children), pinned to `cpus`, logging into `workdir`."""

    def __init__(self, name: str, argv: Sequence[str], port: int, workdir: Path, cpus: str) -> None:
        self.name, self.port, self.workdir = name, port, workdir
        self.log = workdir / f"{name}.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                ["taskset", "-c", cpus, *argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                start_new_session=True,
            )

    def log_tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def dig(self, *args: str) -> list[str]:
        argv = ["dig", "+short", "+time=1", "+tries=1", "@127.0.0.1", "-p", str(self.port), *args]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        except subprocess.TimeoutExpired:
            return []
        return [] if done.returncode else done.stdout.split()

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with status {self.proc.returncode}:\n{self.log_tail()}")
            if self.dig("SOA", ORIGIN):
                return
            time.sleep(0.2)
        raise BenchError(
            f"{self.name} did not answer SOA {ORIGIN} within {timeout:.0f} s:\n{self.log_tail()}"
        )

    def cpu(self) -> Cpu:
        return cpu_of(process_tree(self.proc.pid))

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


@dataclass(frozen=True)
class Run:
    """One dnsperf run against one server, with the server's CPU time over it."""

    scenario: str
    server: str
    rate: int  # -Q, 0 = unthrottled
    seconds: float
    sent: int
    completed: int
    lost: int
    rcodes: str
    qps: float
    latency_ms: float
    wall_s: float
    cpu_s: float
    cpu_ticks_s: float

    @property
    def us_per_query(self) -> float:
        return self.cpu_s / self.completed * 1e6 if self.completed else float("inf")

    @property
    def us_per_query_ticks(self) -> float:
        return self.cpu_ticks_s / self.completed * 1e6 if self.completed else float("inf")

    @property
    def cpu_percent(self) -> float:
        """Share of one CPU the server used during the run."""
        return 100.0 * self.cpu_s / self.wall_s

    @property
    def lost_pct(self) -> float:
        return 100.0 * self.lost / self.sent if self.sent else 100.0


def _field(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    if found is None:
        raise BenchError(f"dnsperf output lacks {pattern!r}:\n{text}")
    return found.group(1)


@dataclass(frozen=True)
class Options:
    seconds: float
    warmup: float
    calibrate: float
    outstanding: int
    client_cpu: str
    workdir: Path
    clients: int = 1


def dnsperf(server: Server, scenario: Scenario, opts: Options, seconds: float, rate: int) -> Run:
    queries = opts.workdir / f"{scenario.key}.queries"
    if not queries.exists():
        queries.write_text(scenario.queries())
    argv = ["taskset", "-c", opts.client_cpu, "dnsperf", "-s", "127.0.0.1", "-p", str(server.port)]
    argv += [
        "-d",
        str(queries),
        "-l",
        str(seconds),
        "-c",
        str(opts.clients),
        "-T",
        str(opts.clients),
        "-t",
        "2",
    ]
    argv += ["-q", str(opts.outstanding), *(["-Q", str(rate)] if rate else []), *scenario.dnsperf_args]
    before, started = server.cpu(), time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    except subprocess.TimeoutExpired as error:
        raise BenchError(f"dnsperf against {server.name} did not finish: {error}") from error
    after, wall = server.cpu(), time.monotonic() - started
    if server.proc.poll() is not None:
        raise BenchError(f"{server.name} died during the run:\n{server.log_tail()}")
    if done.returncode:
        raise BenchError(f"dnsperf failed ({done.returncode}): {done.stderr.strip()}")
    out = done.stdout
    return Run(
        scenario=scenario.key,
        server=server.name,
        rate=rate,
        seconds=seconds,
        sent=int(_field(r"Queries sent:\s+(\d+)", out)),
        completed=int(_field(r"Queries completed:\s+(\d+)", out)),
        lost=int(_field(r"Queries lost:\s+(\d+)", out)),
        rcodes=_field(r"Response codes:\s+(.*)", out).strip(),
        qps=float(_field(r"Queries per second:\s+([\d.]+)", out)),
        latency_ms=1e3 * float(_field(r"Average Latency \(s\):\s+([\d.]+)", out)),
        wall_s=wall,
        cpu_s=after.precise - before.precise,
        cpu_ticks_s=after.ticks - before.ticks,
    )


def check_answers(servers: Sequence[Server]) -> dict[str, dict[str, list[str]]]:
    """Ask each server every name once; a server must answer with some of the A records."""
    seen: dict[str, dict[str, list[str]]] = {}
    for scenario in SCENARIOS:
        if scenario.rcode != "NOERROR":
            continue
        for server in servers:
            answer = server.dig(*scenario.dig_args, "A", scenario.qname)
            if not answer or not set(answer) <= set(ADDRESSES):
                raise BenchError(f"{server.name} answered {scenario.qname} A with {answer}, not {ADDRESSES}")
            seen.setdefault(scenario.key, {})[server.name] = answer
    for server in ("gslbd", "gdnsd"):
        if server in seen["geo"] and seen["geo"][server] != [ADDRESSES[0]]:
            print(
                f"dns_bench: warning: {server} ignored ECS 10.1.0.0/24 (geo answered {seen['geo'][server]})"
            )
    return seen


def with_threads(config: str, threads: int) -> str:
    """GSLBD_CONFIG text with `dns.threads` set (the other benches format GSLBD_CONFIG without it)."""
    if threads == 1:
        return config
    return re.sub(r"workers: (\d+)\}", rf"workers: \1, threads: {threads}}}", config, count=1)


def start_servers(
    args: argparse.Namespace, workdir: Path, workers: int | None = None, threads: int | None = None
) -> list[Server]:
    taken: set[int] = set()
    servers: list[Server] = []
    workers = args.workers if workers is None else workers
    threads = args.threads if threads is None else threads
    try:
        port = free_port(taken)
        config = workdir / f"gslbd-{workers}.yaml"
        config.write_text(with_threads(GSLBD_CONFIG.format(port=port, workers=workers), threads))
        argv = [part.format(config=config, port=port) for part in shlex.split(args.gslbd_cmd)]
        servers.append(Server("gslbd", argv, port, workdir, args.server_cpus))
        if args.dnssec:  # the same zone signed: a key pair as `gslbd dnssec keygen` writes it
            key = gslbd_key(workdir / "keys")
            port = free_port(taken)
            config = workdir / f"gslbd-signed-{workers}.yaml"
            signed = GSLBD_CONFIG.replace(
                "    nameservers: [{{name: ns1.bench.example., address: 127.0.0.1}}]\n",
                "    nameservers: [{{name: ns1.bench.example., address: 127.0.0.1}}]\n"
                f"    dnssec: {{{{keys: [{key}]}}}}\n",
            )
            config.write_text(with_threads(signed.format(port=port, workers=workers), threads))
            argv = [part.format(config=config, port=port) for part in shlex.split(args.gslbd_cmd)]
            servers.append(Server("signed", argv, port, workdir, args.server_cpus))
        if not args.gslbd_only and not args.dnssec:
            port = free_port(taken)
            gdnsd_dir = workdir / "gdnsd"
            (gdnsd_dir / "zones").mkdir(parents=True)
            (gdnsd_dir / "zones" / "bench.example").write_text(gdnsd_zone())
            (gdnsd_dir / "config").write_text(GDNSD_CONFIG.format(dir=gdnsd_dir, port=port, workers=workers))
            argv = [args.gdnsd, "-c", str(gdnsd_dir), "-l", "-f", "start"]
            servers.append(Server("gdnsd", argv, port, workdir, args.server_cpus))
            port = free_port(taken)
            knot_dir = workdir / "knot"
            knot_dir.mkdir()
            (knot_dir / "bench.example.zone").write_text(knot_zone())
            conf = knot_dir / "knot.conf"
            conf.write_text(KNOT_CONFIG.format(dir=knot_dir, port=port, workers=workers))
            servers.append(Server("knot", [args.knotd, "-c", str(conf)], port, workdir, args.server_cpus))
        for server in servers:
            server.wait_ready(args.start_timeout)
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def checked(run: Run, max_lost: float) -> Run:
    if run.lost_pct > max_lost:
        raise BenchError(
            f"{run.server} {run.scenario}: dnsperf lost {run.lost} of {run.sent} queries "
            f"({run.lost_pct:.2f}% > {max_lost}%); lower --load or --rate"
        )
    expected = next(s.rcode for s in SCENARIOS if s.key == run.scenario)
    codes = {part.split()[0] for part in run.rcodes.split(",") if part.strip()}
    # A signed zone answers a new name within its denial budget with an RFC 9824 compact denial, which
    # is NOERROR (NODATA with NXNAME) to a query without CO; past the budget, NXDOMAIN from the chain.
    allowed = {expected, "NOERROR"} if run.server == "signed" and expected == "NXDOMAIN" else {expected}
    if not codes <= allowed:
        raise BenchError(
            f"{run.server} {run.scenario}: response codes {run.rcodes}, expected only {expected}"
        )
    return run


@dataclass(frozen=True)
class Measurement:
    answers: dict[str, dict[str, list[str]]]
    unthrottled: list[Run]
    slowest: Run
    rate: int
    runs: list[Run]
    idle_cpu_ms_per_s: dict[str, float]


def idle_cpu(servers: Sequence[Server], seconds: float) -> dict[str, float]:
    """CPU milliseconds per second each server burns with no queries (timers, control plane)."""
    before = [server.cpu() for server in servers]
    time.sleep(seconds)
    return {
        server.name: 1e3 * (server.cpu().precise - start.precise) / seconds
        for server, start in zip(servers, before, strict=True)
    }


def measure(args: argparse.Namespace, servers: list[Server], workdir: Path) -> Measurement:
    opts = Options(args.seconds, args.warmup, args.calibrate, args.outstanding, args.client_cpu, workdir)
    answers = check_answers(servers)
    idle = idle_cpu(servers, args.idle) if args.idle else {}
    unthrottled: list[Run] = []
    for scenario in selected(args):
        for server in servers:
            if opts.warmup:
                dnsperf(server, scenario, opts, opts.warmup, 0)
            unthrottled.append(checked(dnsperf(server, scenario, opts, opts.calibrate, 0), args.max_lost))
    slowest = min(unthrottled, key=lambda run: run.qps)
    rate = args.rate or max(100, int(slowest.qps * args.load))
    runs: list[Run] = []
    for scenario in selected(args):
        for round_no in range(args.rounds):
            order = servers if round_no % 2 == 0 else servers[::-1]
            for server in order:
                if opts.warmup:
                    dnsperf(server, scenario, opts, opts.warmup, rate)
                runs.append(checked(dnsperf(server, scenario, opts, opts.seconds, rate), args.max_lost))
    return Measurement(answers, unthrottled, slowest, rate, runs, idle)


def selected(args: argparse.Namespace) -> tuple[Scenario, ...]:
    keys = args.scenarios.split(",") if args.scenarios else [s.key for s in SCENARIOS]
    return tuple(s for s in SCENARIOS if s.key in keys)


def median_us(runs: Sequence[Run], scenario: str, server: str) -> float:
    return statistics.median(r.us_per_query for r in runs if r.scenario == scenario and r.server == server)


def compared(runs: Sequence[Run]) -> tuple[str, tuple[str, ...]]:
    """(the server measured, its references): gslbd against gdnsd and Knot, or (--dnssec) the signed
    gslbd against the unsigned one."""
    if any(r.server == "signed" for r in runs):
        return "signed", ("gslbd",)
    return "gslbd", ("gdnsd", "knot")


def ratios_of(runs: Sequence[Run]) -> dict[str, dict[str, float]]:
    """Median measured / median reference CPU per query, per scenario and reference server."""
    subject, refs = compared(runs)
    out: dict[str, dict[str, float]] = {}
    for key in dict.fromkeys(r.scenario for r in runs):
        for ref in refs:
            if any(r.scenario == key and r.server == ref for r in runs):
                out.setdefault(key, {})[ref] = median_us(runs, key, subject) / median_us(runs, key, ref)
    return out


def print_table(runs: Sequence[Run]) -> dict[str, dict[str, float]]:
    ratios = ratios_of(runs)
    subject, refs = compared(runs)
    head = f"{'scenario':<26}{'server':<8}{'answers/s':>10}{'answered':>10}{'lost':>6}"
    columns = "".join(f"{'/' + ref:>8}" for ref in refs)
    print(f"{head}{'CPU %':>7}{'µs/query':>10}{'(ticks)':>9}{columns}")
    for scenario in SCENARIOS:
        for run in (r for r in runs if r.scenario == scenario.key):
            cells = [""] * len(refs)
            if run.server == subject:
                for i, ref in enumerate(refs):
                    if any(r.scenario == scenario.key and r.server == ref for r in runs):
                        cells[i] = f"{run.us_per_query / median_us(runs, scenario.key, ref):.2f}"
            print(
                f"{scenario.key + ' (' + scenario.policy + ')':<26}{run.server:<8}{run.qps:>10.0f}"
                f"{run.completed:>10}{run.lost:>6}{run.cpu_percent:>7.1f}{run.us_per_query:>10.1f}"
                f"{run.us_per_query_ticks:>9.1f}{''.join(f'{cell:>8}' for cell in cells)}"
            )
    return ratios


def targets_of(ratios: dict[str, dict[str, float]]) -> dict[str, tuple[str, float]]:
    return DNSSEC_TARGETS if any("gslbd" in refs for refs in ratios.values()) else TARGETS


def verdicts(ratios: dict[str, dict[str, float]]) -> dict[str, bool]:
    out = {}
    for key, (ref, target) in targets_of(ratios).items():
        ratio = ratios.get(key, {}).get(ref)
        if ratio is not None:
            out[key] = ratio <= target
            subject = "signed" if ref == "gslbd" else "gslbd"
            print(
                f"  {key:<5} {subject}/{ref} {ratio:.2f}, target <= {target}: "
                f"{'met' if out[key] else 'NOT met'}"
            )
    return out


def report(args: argparse.Namespace, result: Measurement) -> dict[str, dict[str, float]]:
    print(f"servers on CPU {args.server_cpus}, dnsperf on CPU {args.client_cpu}, workers {args.workers}")
    if result.idle_cpu_ms_per_s:
        idle = ", ".join(f"{name} {ms:.1f}" for name, ms in result.idle_cpu_ms_per_s.items())
        print(f"idle CPU (ms per s): {idle}")
    print(
        f"\nunthrottled: {args.calibrate:g} s runs, -q {args.outstanding}; one dnsperf thread sets the pace"
    )
    print_table(result.unthrottled)
    slowest = result.slowest
    how = (
        "--rate"
        if args.rate
        else f"{args.load:.0%} of the slowest unthrottled, {slowest.server} {slowest.scenario}"
    )
    print(f"\nfixed rate: {result.rate} queries/s ({how}), {args.seconds:g} s x {args.rounds} round(s)")
    ratios = print_table(result.runs)
    print("\ntargets (fixed rate):")
    verdicts(ratios)
    return ratios


@dataclass(frozen=True)
class Scaling:
    workers: int
    threads: int
    qps: float
    cpu_s: float
    completed: int


def scaling(args: argparse.Namespace, workdir: Path) -> list[Scaling]:
    """gslbd alone, unthrottled rr, (dns.workers, dns.threads) (1, 1), (1, 2), (2, 1), (2, 2) in turn,
    --scaling-rounds times (the median is reported), server and dnsperf (two threads) on every CPU."""
    runs: dict[tuple[int, int], list[Scaling]] = {}
    scenario = SCENARIOS[0]
    for n, (workers, threads) in enumerate(
        [shape for _ in range(args.scaling_rounds) for shape in SCALING_SHAPES]
    ):
        sub = workdir / f"scaling-{workers}-{threads}-{n}"
        sub.mkdir()
        opts = Options(args.seconds, args.warmup, args.calibrate, args.outstanding, args.scaling_cpus, sub, 2)
        saved = args.server_cpus
        args.server_cpus = args.scaling_cpus
        only = args.gslbd_only
        args.gslbd_only = True
        try:
            servers = start_servers(args, sub, workers, threads)
        finally:
            args.server_cpus, args.gslbd_only = saved, only
        try:
            dnsperf(servers[0], scenario, opts, opts.warmup, 0)
            run = dnsperf(servers[0], scenario, opts, args.seconds, 0)
        finally:
            servers[0].stop()
        runs.setdefault((workers, threads), []).append(
            Scaling(workers, threads, run.qps, run.cpu_s, run.completed)
        )
    out = [sorted(found, key=lambda s: s.qps)[len(found) // 2] for found in runs.values()]
    print(f"\nscaling: gslbd rr unthrottled, server and dnsperf (2 threads) on CPUs {args.scaling_cpus}")
    for s in out:
        spread = [f"{r.qps:.0f}" for r in runs[(s.workers, s.threads)]]
        print(
            f"  workers {s.workers} threads {s.threads}: {s.qps:>9.0f} answers/s, "
            f"{s.cpu_s / s.completed * 1e6:5.2f} µs server CPU per answer, x{s.qps / out[0].qps:.2f}"
            f" (runs: {', '.join(spread)})"
        )
    return out


def tool_version(argv: Sequence[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    found = re.search(r"version:?\s+(\S+)", done.stdout + done.stderr, re.IGNORECASE)
    return found.group(1) if found else "?"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    default_cmd = f"{shlex.quote(sys.executable)} -m gslbd serve --config {{config}}"
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--seconds", type=float, default=10.0, help="length of each measured run (default 10)")
    p.add_argument("--gslbd-cmd", default=default_cmd, help="command line; {config} and {port} are filled in")
    p.add_argument("--workers", type=int, default=1, help="gslbd dns.workers, knot udp-workers (default 1)")
    p.add_argument("--threads", type=int, default=1, help="gslbd dns.threads (default 1)")
    p.add_argument("--json", type=Path, help="also write every figure to this file")
    p.add_argument(
        "--rate", type=int, default=0, help="fixed queries/s (default: --load x slowest unthrottled)"
    )
    p.add_argument("--load", type=float, default=0.7, help="share of the slowest unthrottled rate (0.7)")
    p.add_argument("--rounds", type=int, default=1, help="measured runs per server and scenario (median)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each run (default 1)")
    p.add_argument("--calibrate", type=float, default=3.0, help="seconds of each unthrottled run (default 3)")
    p.add_argument("--idle", type=float, default=2.0, help="seconds of idle CPU measurement (default 2)")
    p.add_argument("--outstanding", type=int, default=100, help="dnsperf -q (default 100)")
    p.add_argument("--max-lost", type=float, default=0.5, help="largest share of lost queries, %% (0.5)")
    p.add_argument("--server-cpus", default="1", help="taskset CPU list of the servers (default 1)")
    p.add_argument("--client-cpu", default="0", help="taskset CPU of dnsperf (default 0)")
    p.add_argument("--knotd", default=shutil.which("knotd") or "/usr/sbin/knotd", help="knotd binary")
    p.add_argument("--gdnsd", default=shutil.which("gdnsd") or "/usr/sbin/gdnsd", help="gdnsd binary")
    p.add_argument("--scenarios", default="", help="comma-separated keys (default: all)")
    p.add_argument("--gslbd-only", action="store_true", help="measure gslbd alone (no reference servers)")
    p.add_argument(
        "--scaling", action="store_true", help="also measure q/s with dns.workers and dns.threads 1 and 2"
    )
    p.add_argument("--scaling-rounds", type=int, default=1, help="runs of each --scaling shape (median)")
    p.add_argument(
        "--dnssec", action="store_true", help="gslbd with its zone signed against unsigned, DO queries"
    )
    p.add_argument("--scaling-cpus", default="0,1", help="CPUs of the scaling runs (default 0,1)")
    p.add_argument("--start-timeout", type=float, default=30.0, help="seconds to wait for a server to answer")
    p.add_argument("--require-target", action="store_true", help="exit 1 when a target is not met")
    p.add_argument(
        "--profiles",
        default="",
        help="feature profiles side by side (issue 21): comma-separated of plain, internet, signed, peers, "
        "geoip_outside, dnstap, all; or all-of-them (see bench/dns_profiles.py)",
    )
    p.add_argument(
        "--perf", action="store_true", help="--profiles: perf record gslbd where a target is missed"
    )
    p.add_argument("--tables-from", type=Path, help="print the tables of a --profiles --json FILE again")
    return p.parse_args(argv)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that stop the servers


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # The servers start in a temporary directory: a relative PYTHONPATH (`PYTHONPATH=src`) would
    # silently import the installed gslbd instead of the tree under test.
    if os.environ.get("PYTHONPATH"):
        os.environ["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p
        )
    signal.signal(signal.SIGTERM, _terminate)
    if args.profiles or args.tables_from:
        return _profiles(args)
    if args.dnssec:  # DO on every query; only what a signed zone changes is compared
        global SCENARIOS
        SCENARIOS = tuple(
            replace(s, dnsperf_args=(*s.dnsperf_args, "-D")) for s in SCENARIOS if s.key in DNSSEC_TARGETS
        )
    alone = args.gslbd_only or args.dnssec
    tools = ["dnsperf", "dig", "taskset"] + ([] if alone else [args.knotd, args.gdnsd])
    for tool in tools:
        if shutil.which(tool) is None:
            print(f"dns_bench: {tool} not found on PATH", file=sys.stderr)
            return 2
    grown: list[Scaling] = []
    with tempfile.TemporaryDirectory(prefix="gslbd-bench-") as tmp:
        workdir = Path(tmp)
        try:
            servers = start_servers(args, workdir)
            try:
                result = measure(args, servers, workdir)
            finally:
                for server in servers:
                    server.stop()
            if args.scaling:
                grown = scaling(args, workdir)
        except BenchError as error:
            print(f"dns_bench: {error}", file=sys.stderr)
            return 2
    ratios = report(args, result)
    met = _met(ratios)
    if grown:
        rates = {(s.workers, s.threads): s.qps for s in grown}
        print(
            f"\nscaling: threads 1 -> 2 x{rates[(1, 2)] / rates[(1, 1)]:.2f}, "
            f"workers 1 -> 2 x{rates[(2, 1)] / rates[(1, 1)]:.2f} answers/s"
        )
    if args.json:
        figures = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": {"cpu": _cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release()},
            "python": platform.python_version(),
            "knot": tool_version([args.knotd, "--version"]),
            "gdnsd": tool_version([args.gdnsd, "-h"]),
            "dnsperf": tool_version(["dnsperf", "-h"]),
            "options": {k: str(v) for k, v in vars(args).items()},
            "answers": result.answers,
            "rate": result.rate,
            "unthrottled": [asdict(r) | {"us_per_query": r.us_per_query} for r in result.unthrottled],
            "runs": [
                asdict(r) | {"us_per_query": r.us_per_query, "us_per_query_ticks": r.us_per_query_ticks}
                for r in result.runs
            ],
            "idle_cpu_ms_per_s": result.idle_cpu_ms_per_s,
            "ratios": ratios,
            "unthrottled_ratios": ratios_of(result.unthrottled),
            "targets": {
                k: {"reference": r, "max_ratio": t, "met": met.get(k)}
                for k, (r, t) in targets_of(ratios).items()
            },
            "scaling": [asdict(s) for s in grown],
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 1 if args.require_target and not all(met.values()) else 0


def _profiles(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from dns_bench import BenchError as ProfileError  # what dns_profiles raises (this file is __main__)
    from dns_profiles import run_profiles, tables_from_json  # bench/ is not a package: found via sys.path

    if args.tables_from:
        return tables_from_json(args.tables_from)

    for tool in ("dnsperf", "dig", "taskset", args.knotd, args.gdnsd):
        if shutil.which(tool) is None:
            print(f"dns_bench: {tool} not found on PATH", file=sys.stderr)
            return 2
    where = subprocess.run(
        [sys.executable, "-c", "import gslbd; print(gslbd.__file__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    print(f"gslbd from {where.stdout.strip() or where.stderr.strip()}")
    with tempfile.TemporaryDirectory(prefix="gslbd-bench-") as tmp:
        try:
            return run_profiles(args, Path(tmp))
        except (BenchError, ProfileError) as error:
            print(f"dns_bench: {error}", file=sys.stderr)
            return 2


def _met(ratios: dict[str, dict[str, float]]) -> dict[str, bool]:
    out = {}
    for key, (ref, target) in targets_of(ratios).items():
        ratio = ratios.get(key, {}).get(ref)
        if ratio is not None:
            out[key] = ratio <= target
    return out


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


if __name__ == "__main__":
    raise SystemExit(main())
