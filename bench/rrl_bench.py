#!/usr/bin/env python3
"""Server CPU per answered query with response rate limiting off and on: the cost of `dns.rrl`.

Run on demand, not by the test suite (needs dnsperf, dig and taskset; uses bench/dns_bench.py's parts):

    .venv/bin/python bench/rrl_bench.py --seconds 10 --rounds 3

Two gslbd processes serve dns_bench's names, one without `dns.rrl` and one with it on (a rate no query
reaches, so every response goes through the bucket lookup and refill and is answered, as a legitimate
client's would be). Both are pinned to --server-cpus, dnsperf to --client-cpu; each run goes at one fixed
rate (a share of the slower unthrottled rate), alternating which server goes first; the figure is the
server's CPU time divided by the queries dnsperf saw answered, medians over the rounds. The target: with
RRL on at most 10% more CPU per answered query (ratio <= 1.10). Exit status 1 with --require-target when
the ratio is above it, 2 when no valid figure could be made.

`--features guard` (issue 21) turns on what an internet-facing server runs: RRL as above, `dns.cookies`
and `dns.identity`, and every query carries EDNS with a client cookie and an NSID option (dnsperf -E), the
same queries to both servers (the plain one answers them without cookie or NSID). Besides the CPU ratio it
prints each server's share of UDP queries answered by the C table (`udp_native_answers` / `udp_queries`
from /metrics): with the guard in C it must be about 100%.

`--features peers` (issue 21) compares a server without peers and one with a peer site (whose nameserver
does not answer: the exchange hook is set, as at every multi-site deployment) under the random NXDOMAIN
flood: with the exchange's names marked in C, C answers every NXDOMAIN (before, every one went to Python).
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
import sys
import tempfile
import urllib.request
from dataclasses import replace
from pathlib import Path

from dns_bench import (
    GSLBD_CONFIG,
    SCENARIOS,
    BenchError,
    Options,
    Run,
    Server,
    checked,
    dnsperf,
    free_port,
)

TARGET = 1.10
RRL = "rrl: {responses_per_second: 1000000, errors_per_second: 1000000, ipv4_prefix_length: 32}"
GUARD = f"{RRL}, cookies: {{}}, identity: bench"
# EDNS options of every query with --features guard: a client cookie (8 bytes) and NSID (dnsperf sends
# no empty option value; any content asks for the identity).
GUARD_OPTIONS = ("-E", "10:2464c4abcf10c957", "-E", "3:00")
# --features peers: this site and one peer site (nothing answers at its address: the exchange hook is set).
PEERS = "site: {name: eu}\npeers: {interval: 5s, sites: [{name: us, nameservers: ['127.0.0.1:9']}]}\n"


def start(name: str, port: int, api: int, features: str, args: argparse.Namespace, workdir: Path) -> Server:
    text = GSLBD_CONFIG.format(port=port, workers=1) + f'api: {{listen: "127.0.0.1:{api}"}}\n'
    if features == PEERS:
        text += features
    elif features:
        text = text.replace("workers: 1}", f"workers: 1, {features}}}")
    config = workdir / f"{name}.yaml"
    config.write_text(text)
    argv = [part.format(config=config, port=port) for part in shlex.split(args.gslbd_cmd)]
    server = Server(name, argv, port, workdir, args.server_cpus)
    server.wait_ready(args.start_timeout)
    return server


def c_share(api: int) -> float:
    """The share of UDP queries the C table answered, from the server's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{api}/metrics", timeout=5) as response:
        text = response.read().decode()

    def event(name: str) -> float:
        found = re.search(rf'gslbd_dns_server_events_total{{event="{name}"}} (\S+)', text)
        return float(found.group(1)) if found else 0.0

    queries = event("udp_queries")
    return event("udp_native_answers") / queries if queries else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=0, help="fixed dnsperf -Q (0 = share of the slower)")
    parser.add_argument("--load", type=float, default=0.7)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--calibrate", type=float, default=3.0)
    parser.add_argument("--outstanding", type=int, default=100)
    parser.add_argument("--max-lost", type=float, default=0.5)
    parser.add_argument("--server-cpus", default="1")
    parser.add_argument("--client-cpu", default="0")
    parser.add_argument(
        "--gslbd-cmd", default=f"{shlex.quote(sys.executable)} -m gslbd serve --config {{config}}"
    )
    parser.add_argument("--start-timeout", type=float, default=30.0)
    parser.add_argument("--require-target", action="store_true")
    parser.add_argument(
        "--features",
        choices=("rrl", "guard", "peers"),
        default="rrl",
        help="guard: RRL + cookies + NSID, EDNS queries; peers: a peer site, the NXDOMAIN flood",
    )
    args = parser.parse_args(argv)
    scenario = SCENARIOS[0]  # rr: round_robin, no EDNS
    features = RRL
    if args.features == "guard":
        features = GUARD
        scenario = replace(scenario, dnsperf_args=GUARD_OPTIONS)
    elif args.features == "peers":
        features = PEERS
        scenario = next(s for s in SCENARIOS if s.key == "nx")
    shares: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="rrl-bench-") as tmp:
        workdir = Path(tmp)
        servers: list[Server] = []
        try:
            taken: set[int] = set()
            apis = {}
            for name, on in (("rrl-off", ""), ("rrl-on", features)):
                port, apis[name] = free_port(taken), free_port(taken)
                servers.append(start(name, port, apis[name], on, args, workdir))
            opts = Options(
                args.seconds, args.warmup, args.calibrate, args.outstanding, args.client_cpu, workdir
            )
            calibration = [
                checked(dnsperf(s, scenario, opts, opts.calibrate, 0), args.max_lost) for s in servers
            ]
            rate = args.rate or max(100, int(min(r.qps for r in calibration) * args.load))
            runs: list[Run] = []
            for round_no in range(args.rounds):
                for server in servers if round_no % 2 == 0 else servers[::-1]:
                    dnsperf(server, scenario, opts, opts.warmup, rate)
                    runs.append(checked(dnsperf(server, scenario, opts, opts.seconds, rate), args.max_lost))
            shares = {server.name: c_share(apis[server.name]) for server in servers}
        except BenchError as error:
            print(f"rrl_bench: {error}", file=sys.stderr)
            return 2
        finally:
            for server in servers:
                server.stop()
    print(
        "unthrottled: "
        + ", ".join(f"{r.server} {r.qps:,.0f} q/s ({r.us_per_query:.1f} us/q)" for r in calibration)
    )
    print(
        f"fixed rate {rate:,} q/s, {args.rounds} x {args.seconds:g} s, scenario {scenario.key}, "
        f"features on: {features}"
        + (f", queries with {' '.join(GUARD_OPTIONS)}" if args.features == "guard" else "")
    )
    medians = {}
    for name in ("rrl-off", "rrl-on"):
        figures = [r.us_per_query for r in runs if r.server == name]
        medians[name] = statistics.median(figures)
        print(
            f"  {name:8} {medians[name]:6.2f} us/query  (runs: {', '.join(f'{f:.2f}' for f in figures)})"
            f"  answered by C: {shares.get(name, 0.0):.1%}"
        )
    ratio = medians["rrl-on"] / medians["rrl-off"]
    print(f"RRL cost ratio (on / off): {ratio:.3f}  (target <= {TARGET})")
    return 1 if args.require_target and ratio > TARGET else 0


if __name__ == "__main__":
    raise SystemExit(main())
