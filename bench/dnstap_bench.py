#!/usr/bin/env python3
"""What the dnstap query log costs: gslbd's CPU per answered query with log.dnstap off and on.

Run on demand, not by the test suite (needs dnsperf, dig, taskset and Debian's `dnstap` reader on PATH):

    /tmp/venv/bin/python bench/dnstap_bench.py --seconds 10 --rounds 3

Two gslbd processes serve the same config (dns_bench.py's, round_robin name `rr.bench.example.`) on free
127.0.0.1 ports, both pinned to --server-cpus; the second also has `log.dnstap` (queries and responses) to a
`dnstap -u SOCKET -w /dev/null` reader pinned with dnsperf to --client-cpu, so the reader's own work is
not counted. Each server first gets an unthrottled dnsperf run; then both are measured at one fixed rate
(--load of the slower unthrottled rate, or --rate), alternating which goes first, and the figure is the
median CPU time per answered query (all threads) of each and their ratio, on / off, from the same
invocation. After the runs the dnstap counters of the `on` server (/metrics) say how many exchanges were
written and dropped, and its UDP and TCP counters how many queries C answered without Python (with
log.dnstap the C UDP loop and the C TCP answerer stay on and log through the ring: docs/wire.md, "dnstap
from the C loop").

Two rows by default (--transports udp,tcp): rr over UDP, and rr over TCP pipelined (dnsperf -m tcp:
each of its clients keeps one connection and up to -q queries outstanding on it), each measured as above.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dns_bench import (  # bench/ is not a package: found through sys.path
    GSLBD_CONFIG,
    SCENARIOS,
    BenchError,
    Options,
    Run,
    Scenario,
    Server,
    checked,
    dnsperf,
    free_port,
)

BY_TRANSPORT = {  # rr: round_robin, no EDNS; over UDP, and over TCP pipelined
    "udp": SCENARIOS[0],
    "tcp": next(s for s in SCENARIOS if s.key == "tcp"),
}


def start(args: argparse.Namespace, workdir: Path) -> tuple[list[Server], subprocess.Popen[bytes], int]:
    """The `off` and `on` servers, and the dnstap reader of `on`; also the `on` server's API port."""
    taken: set[int] = set()
    sock = workdir / "dnstap.sock"
    reader_log = (workdir / "reader.log").open("wb")
    reader = subprocess.Popen(
        ["taskset", "-c", args.client_cpu, "dnstap", "-u", str(sock), "-w", "/dev/null"],
        stdout=reader_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    servers: list[Server] = []
    api_port = free_port(taken)
    try:
        for name in ("off", "on"):
            port = free_port(taken)
            text = GSLBD_CONFIG.format(port=port, workers=args.workers)
            if name == "on":
                text += f'api: {{listen: "127.0.0.1:{api_port}"}}\n'
                text += f"log: {{dnstap: {{socket: {sock}, queries: true, responses: true}}}}\n"
            config = workdir / f"{name}.yaml"
            config.write_text(text)
            argv = [part.format(config=config, port=port) for part in shlex.split(args.gslbd_cmd)]
            servers.append(Server(name, argv, port, workdir, args.server_cpus))
        for server in servers:
            server.wait_ready(args.start_timeout)
    except BaseException:
        for server in servers:
            server.stop()
        reader.kill()
        raise
    return servers, reader, api_port


def dnstap_counters(api_port: int) -> dict[str, int]:
    """The `on` server's dnstap counters, and its UDP and TCP queries and those C answered."""
    with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = re.findall(
        r'gslbd_dns_server_events_total\{event="(dnstap_\w+|(?:udp|tcp)_(?:queries|native_answers))"\} (\S+)',
        text,
    )
    return {name: int(float(value)) for name, value in found}


def median_us(runs: Sequence[Run], server: str) -> float:
    return statistics.median(r.us_per_query for r in runs if r.server == server)


def table(runs: Sequence[Run]) -> None:
    print(
        f"{'dnstap':<8}{'answers/s':>10}{'answered':>10}{'lost':>6}{'CPU %':>7}{'µs/query':>10}{'(ticks)':>9}"
    )
    for run in runs:
        print(
            f"{run.server:<8}{run.qps:>10.0f}{run.completed:>10}{run.lost:>6}{run.cpu_percent:>7.1f}"
            f"{run.us_per_query:>10.1f}{run.us_per_query_ticks:>9.1f}"
        )


def measure(
    args: argparse.Namespace, servers: list[Server], workdir: Path, scenario: Scenario
) -> tuple[list[Run], list[Run], int]:
    opts = Options(args.seconds, args.warmup, args.calibrate, args.outstanding, args.client_cpu, workdir)
    for server in servers:
        answer = server.dig("A", scenario.qname, *scenario.dig_args)
        if not answer:
            raise BenchError(f"gslbd ({server.name}) did not answer {scenario.qname}")
    unthrottled = []
    for server in servers:
        if opts.warmup:
            dnsperf(server, scenario, opts, opts.warmup, 0)
        unthrottled.append(checked(dnsperf(server, scenario, opts, opts.calibrate, 0), args.max_lost))
    rate = args.rate or max(100, int(min(r.qps for r in unthrottled) * args.load))
    runs = []
    for round_no in range(args.rounds):
        for server in servers if round_no % 2 == 0 else servers[::-1]:
            if opts.warmup:
                dnsperf(server, scenario, opts, opts.warmup, rate)
            runs.append(checked(dnsperf(server, scenario, opts, opts.seconds, rate), args.max_lost))
    return unthrottled, runs, rate


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    default_cmd = f"{shlex.quote(sys.executable)} -m gslbd serve --config {{config}}"
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--seconds", type=float, default=10.0, help="length of each measured run (default 10)")
    p.add_argument("--rounds", type=int, default=3, help="measured runs per server (median; default 3)")
    p.add_argument(
        "--rate", type=int, default=0, help="fixed queries/s (default: --load x slower unthrottled)"
    )
    p.add_argument("--load", type=float, default=0.7, help="share of the slower unthrottled rate (0.7)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each run (default 1)")
    p.add_argument("--calibrate", type=float, default=3.0, help="seconds of each unthrottled run (default 3)")
    p.add_argument("--outstanding", type=int, default=100, help="dnsperf -q (default 100)")
    p.add_argument("--max-lost", type=float, default=0.5, help="largest share of lost queries, %% (0.5)")
    p.add_argument(
        "--transports", default="udp,tcp", help="rows, of udp and tcp (pipelined); default udp,tcp"
    )
    p.add_argument("--workers", type=int, default=1, help="gslbd dns.workers (default 1)")
    p.add_argument("--server-cpus", default="1", help="taskset CPU list of gslbd (default 1)")
    p.add_argument("--client-cpu", default="0", help="taskset CPU of dnsperf and the reader (default 0)")
    p.add_argument("--gslbd-cmd", default=default_cmd, help="command line; {config} and {port} are filled in")
    p.add_argument("--start-timeout", type=float, default=30.0, help="seconds to wait for a server to answer")
    return p.parse_args(argv)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    transports = [t for t in args.transports.split(",") if t]
    if not transports or any(t not in BY_TRANSPORT for t in transports):
        print(f"dnstap_bench: --transports: of {', '.join(BY_TRANSPORT)}", file=sys.stderr)
        return 2
    # The servers start in a temporary directory: a relative PYTHONPATH (`PYTHONPATH=src`) would
    # silently import the installed gslbd instead of the tree under test.
    if os.environ.get("PYTHONPATH"):
        os.environ["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p
        )
    signal.signal(signal.SIGTERM, _terminate)
    for tool in ("dnsperf", "dig", "taskset", "dnstap"):
        if shutil.which(tool) is None:
            print(f"dnstap_bench: {tool} not found on PATH", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="gslbd-dnstap-bench-") as tmp:
        workdir = Path(tmp)
        try:
            servers, reader, api_port = start(args, workdir)
            try:
                results = [measure(args, servers, workdir, BY_TRANSPORT[t]) for t in transports]
                counters = dnstap_counters(api_port)
            finally:
                for server in servers:
                    server.stop()
                reader.terminate()
                reader.wait(5)
        except BenchError as error:
            print(f"dnstap_bench: {error}", file=sys.stderr)
            return 2
    print(f"gslbd on CPU {args.server_cpus}; dnsperf and the dnstap reader on CPU {args.client_cpu}")
    for transport, (unthrottled, runs, rate) in zip(transports, results, strict=True):
        what = BY_TRANSPORT[transport].policy
        print(f"\n{what}, unthrottled: {args.calibrate:g} s runs, -q {args.outstanding}")
        table(unthrottled)
        print(f"\nfixed rate: {rate} queries/s, {args.seconds:g} s x {args.rounds} round(s)")
        table(runs)
    print("\nCPU per answered query, medians:")
    for transport, (_, runs, _) in zip(transports, results, strict=True):
        off, on = median_us(runs, "off"), median_us(runs, "on")
        print(f"  {transport}: dnstap off {off:.1f} µs, on {on:.1f} µs, on/off {on / off:.2f}")
    by_c = {
        t: (counters.pop(f"{t}_native_answers", 0), counters.pop(f"{t}_queries", 0)) for t in BY_TRANSPORT
    }
    print(
        "dnstap counters of the `on` server: "
        + ", ".join(f"{name} {value}" for name, value in sorted(counters.items()))
        + f" (exchanges; {time.strftime('%Y-%m-%d')})"
    )
    for transport, (native, queries) in by_c.items():
        print(f"{transport.upper()} queries of the `on` server answered by C: {native} of {queries}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
