"""Feature profiles of dns_bench.py (issue 21 item 6): gslbd, Knot with the same modules and gdnsd plain,
side by side in one invocation, for plain, internet (RRL + cookies + NSID), signed (DO), peers, GeoIP
clients outside the topology, dnstap and all of them; TCP pipelined.

    PYTHONPATH=src python bench/dns_bench.py --profiles all-of-them --seconds 5 --rounds 3 --perf

Every profile starts its own three servers (same CPU pinning as the scenarios of dns_bench.py), checks
before measuring that each feature is really on in each server (the pre-flight lines), then measures
every scenario of the profile at one fixed rate (--rate, default 20,000 q/s, the rate of issue 21's table)
--rounds times per server, alternating the order; the figures are medians of server CPU per answered
query. Needs dnspython and mmdb_writer (the venv's) for the GeoIP database and the ECS query file.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import re
import shlex
import socket
import statistics
import struct
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.rdatatype
from dns_bench import (
    ADDRESSES,
    ECS,
    GDNSD_CONFIG,
    ORIGIN,
    BenchError,
    Options,
    Run,
    Scenario,
    Server,
    dnsperf,
    free_port,
    gdnsd_zone,
    gslbd_key,
)

FEATURES = ("rrl", "cookies", "nsid", "signed", "peers", "geoip", "dnstap")
PROFILES: dict[str, frozenset[str]] = {
    "plain": frozenset(),
    "internet": frozenset({"rrl", "cookies", "nsid"}),
    "signed": frozenset({"signed"}),
    "peers": frozenset({"peers"}),
    "geoip_outside": frozenset({"geoip"}),
    "dnstap": frozenset({"dnstap"}),
    "all": frozenset(FEATURES),
}
# Scenarios of each profile (keys of SCENARIOS below); every one is also asked with DO in signed profiles.
PROFILE_SCENARIOS: dict[str, tuple[str, ...]] = {
    "plain": ("rr", "geo", "nx", "tcp"),
    "internet": ("rr", "rrc", "nx"),
    "signed": ("rr", "nx"),
    "peers": ("rr", "nx"),
    "geoip_outside": ("geox",),
    "dnstap": ("rr", "nx"),
    "all": ("rr", "rrc", "geox", "nx", "tcp"),
}
CLIENT_COOKIE = "0102030405060708"
SCENARIOS: dict[str, Scenario] = {
    "rr": Scenario("rr", "round_robin"),
    "rrc": Scenario("rrc", "rr + client cookie", ("-E", f"10:{CLIENT_COOKIE}"), name="rr"),
    "geo": Scenario("geo", "geo + ECS in topology", ECS, name="geo"),
    "geox": Scenario("geox", "geo, GeoIP ECS outside", ("-B",), name="geo"),
    "nx": Scenario("nx", "random NXDOMAIN", rcode="NXDOMAIN"),
    "tcp": Scenario("tcp", "rr over TCP, pipelined", ("-m", "tcp"), name="rr"),
}
# The measured RRL limit: high enough that the fixed rate (one client /24) is never limited, so the
# figure is the cost of RRL's accounting on every answer, what an internet-facing server pays for its
# normal clients. The pre-flight instances use PREFLIGHT_RRL so that a burst is limited.
MEASURED_RRL = 1_000_000
PREFLIGHT_RRL = 10
# GeoIP: three networks far from the topology's 10.x; sites with coordinates, nearest wins.
GEO_RECORDS = {
    "81.0.0.0/8": ({"location": {"latitude": 48.85, "longitude": 2.35}, "country": {"iso_code": "FR"}}, 0),
    "41.0.0.0/8": ({"location": {"latitude": 41.88, "longitude": -87.63}, "country": {"iso_code": "US"}}, 1),
    "175.0.0.0/8": ({"location": {"latitude": 35.68, "longitude": 139.69}, "country": {"iso_code": "JP"}}, 2),
}
SITE_COORDINATES = {"eu": [48.85, 2.35], "us": [41.88, -87.63], "ap": [35.68, 139.69]}
GEOX_SUBNETS = 4096  # distinct client /24s of the GeoIP scenario's query file
# Targets of issue 21 item 6.
KNOT_TARGET = 1.1  # gslbd / Knot with the same features, every scenario
GDNSD_TARGET = 1.15  # gslbd / gdnsd, plain (gdnsd has none of the other features)
INTERNET_TARGET = 1.10  # gslbd internet / gslbd plain: RRL + cookies (+ NSID) add at most 10 %
DNSTAP_TARGET = 1.3  # gslbd dnstap / gslbd plain


def _sites() -> dict[str, object]:
    return {name: {"coordinates": xy} for name, xy in SITE_COORDINATES.items()}


def gslbd_config(features: frozenset[str], port: int, work: Path, key: str, rrl: int) -> dict[str, object]:
    """The gslbd config of a profile, as a mapping (written as JSON, which YAML reads)."""
    dns_section: dict[str, object] = {"listen": [f"127.0.0.1:{port}"], "workers": 1}
    if "rrl" in features:
        dns_section["rrl"] = {"responses_per_second": rrl, "slip": 2}
    if "cookies" in features:
        dns_section["cookies"] = {}
    if "nsid" in features:
        dns_section["identity"] = "bench-gslbd"
    zone: dict[str, object] = {
        "origin": ORIGIN,
        "nameservers": [{"name": f"ns1.{ORIGIN}", "address": "127.0.0.1"}],
    }
    if "signed" in features:
        zone["dnssec"] = {"keys": [key]}
    endpoints = [{"address": a} for a in ADDRESSES]
    geo_endpoints = [{"address": a, "site": s} for a, s in zip(ADDRESSES, ("eu", "us", "ap"), strict=True)]
    config: dict[str, object] = {
        "version": 1,
        "dns": dns_section,
        "zones": [zone],
        "services": [
            {"name": "rr", "policy": "round_robin", "check": "none", "endpoints": endpoints},
            {"name": "geo", "policy": "geo", "check": "none", "endpoints": geo_endpoints},
        ],
        "topology": {
            "networks": [
                {"cidr": "10.1.0.0/16", "site": "eu"},
                {"cidr": "10.2.0.0/16", "site": "us"},
                {"cidr": "10.3.0.0/16", "site": "ap"},
            ]
        },
        "sites": _sites(),
    }
    if "geoip" in features:
        config["topology"]["geoip"] = {"database": str(work / "city.mmdb")}  # type: ignore[index]
    if "peers" in features:
        # A peer site (of no endpoint here) that never answers: the exchange zone and the exchange hook
        # are on, as at a multi-site deployment; its polls time out in the background.
        config["site"] = {"name": "eu"}
        config["peers"] = {"sites": [{"name": "peer", "nameservers": [f"127.0.0.1:{free_port(set())}"]}]}
    if "dnstap" in features:
        config["log"] = {"dnstap": {"file": str(work / "gslbd.dnstap"), "queries": True, "responses": True}}
    return config


def knot_config(features: frozenset[str], port: int, work: Path, rrl: int) -> str:
    lines = [
        "server:",
        f'    rundir: "{work}"',
        f"    listen: 127.0.0.1@{port}",
        "    udp-workers: 1",
        "    tcp-workers: 1",
        "    background-workers: 1",
    ]
    if "nsid" in features:
        lines.append('    nsid: "bench-knot"')
    if "geoip" in features:
        lines.append("    edns-client-subnet: on")
    lines += [f'database:\n    storage: "{work}"', "log:\n  - target: stderr\n    any: warning"]
    modules = []
    if "geoip" in features:
        lines += [
            "mod-geoip:\n  - id: default",
            f'    config-file: "{work}/geo.conf"\n    ttl: 30\n    mode: geodb',
            f'    geodb-file: "{work}/city.mmdb"\n    geodb-key: [ country/iso_code ]',
        ]
        if "signed" in features:
            lines.append("    dnssec: on")
        modules.append("mod-geoip/default")
    if "dnstap" in features:
        lines += [
            f'mod-dnstap:\n  - id: default\n    sink: "{work}/knot.dnstap"',
            "    log-queries: on\n    log-responses: on",
        ]
        modules.append("mod-dnstap/default")
    if "cookies" in features:
        lines.append("mod-cookies:\n  - id: default")
        modules.append("mod-cookies/default")
    if "rrl" in features:
        lines.append(f"mod-rrl:\n  - id: default\n    rate-limit: {rrl}\n    slip: 2")
        modules.append("mod-rrl/default")
    lines += [
        "zone:",
        f"  - domain: {ORIGIN}",
        f'    storage: "{work}"',
        '    file: "bench.example.zone"',
        "    zonefile-sync: -1",
        "    journal-content: none",
    ]
    if "signed" in features:
        lines.append("    dnssec-signing: on")
    if modules:
        lines.append(f"    module: [ {', '.join(modules)} ]")
    return "\n".join(lines) + "\n"


def knot_zone(features: frozenset[str]) -> str:
    lines = [f"$ORIGIN {ORIGIN}", "$TTL 30", "@ SOA ns1 hostmaster 1 3600 600 86400 30", "@ NS ns1"]
    lines += ["ns1 A 127.0.0.1"] + [f"rr A {address}" for address in ADDRESSES]
    if "geoip" not in features:  # mod-geoip answers geo; without it a static RRset
        lines += [f"geo A {address}" for address in ADDRESSES]
    else:  # mod-geoip needs the name to exist in the zone (its answer replaces this one)
        lines.append(f"geo A {ADDRESSES[0]}")
    return "\n".join(lines) + "\n"


KNOT_GEO_CONF = """\
geo.bench.example:
  - geo: "FR"
    A: 192.0.2.1
  - geo: "US"
    A: 192.0.2.2
  - geo: "JP"
    A: 192.0.2.3
"""


def write_mmdb(path: Path) -> None:
    """The GeoIP test database, written as tests/unit/wire/test_ctable_geoip.py writes its own."""
    from mmdb_writer import MMDBWriter
    from netaddr import IPSet

    writer = MMDBWriter(ip_version=6, database_type="GeoLite2-City", ipv4_compatible=True)
    for cidr, (record, _) in GEO_RECORDS.items():
        net = ipaddress.ip_network(cidr)
        writer.insert_network(IPSet([f"::{net.network_address}/{96 + net.prefixlen}"]), record)
    writer.to_db_file(str(path))


def geox_queries(do: bool) -> bytes:
    """dnsperf -B input: geo A with ECS from GEOX_SUBNETS distinct /24s of the GeoIP networks."""
    rng = random.Random(21)
    firsts = [int(ipaddress.ip_network(cidr).network_address) >> 24 for cidr in GEO_RECORDS]
    out = bytearray()
    subnets = {(rng.choice(firsts), rng.randrange(256), rng.randrange(256)) for _ in range(GEOX_SUBNETS * 2)}
    for a, b, c in sorted(subnets)[:GEOX_SUBNETS]:
        # no cookie: a client cookie alone gets BADCOOKIE from Knot's mod-cookies (badcookie-slip 1)
        options: list[dns.edns.Option] = [dns.edns.ECSOption(f"{a}.{b}.{c}.0", 24)]
        query = dns.message.make_query(f"geo.{ORIGIN}", "A", use_edns=0, options=options, want_dnssec=do)
        query.flags &= ~dns.flags.RD
        wire = query.to_wire()
        out += struct.pack("!H", len(wire)) + wire
    return bytes(out)


def nx_queries() -> str:
    return Scenario("nx", "").queries()


@dataclass
class ProfileServers:
    servers: list[Server]
    work: Path
    checks: list[str] = field(default_factory=list)


def start_profile(
    args: argparse.Namespace, profile: str, work: Path, rrl: int, with_gdnsd: bool = True
) -> ProfileServers:
    features = PROFILES[profile]
    work.mkdir(parents=True, exist_ok=True)
    taken: set[int] = set()
    servers: list[Server] = []
    if "geoip" in features and not (work / "city.mmdb").exists():
        write_mmdb(work / "city.mmdb")
    try:
        key = ""
        if "signed" in features:
            key = gslbd_key(work / "keys")
        port = free_port(taken)
        config = work / "gslbd.yaml"
        config.write_text(json.dumps(gslbd_config(features, port, work, key, rrl), indent=1) + "\n")
        argv = [part.format(config=config, port=port) for part in shlex.split(args.gslbd_cmd)]
        servers.append(Server("gslbd", argv, port, work, args.server_cpus))
        port = free_port(taken)
        knot_dir = work / "knot"
        knot_dir.mkdir(exist_ok=True)
        (knot_dir / "bench.example.zone").write_text(knot_zone(features))
        if "geoip" in features:
            (knot_dir / "geo.conf").write_text(KNOT_GEO_CONF)
            (knot_dir / "city.mmdb").write_bytes((work / "city.mmdb").read_bytes())
        conf = knot_dir / "knot.conf"
        conf.write_text(knot_config(features, port, knot_dir, rrl))
        servers.append(Server("knot", [args.knotd, "-c", str(conf)], port, work, args.server_cpus))
        if with_gdnsd:
            port = free_port(taken)
            gdnsd_dir = work / "gdnsd"
            (gdnsd_dir / "zones").mkdir(parents=True, exist_ok=True)
            (gdnsd_dir / "zones" / "bench.example").write_text(gdnsd_zone())
            (gdnsd_dir / "config").write_text(GDNSD_CONFIG.format(dir=gdnsd_dir, port=port, workers=1))
            argv = [args.gdnsd, "-c", str(gdnsd_dir), "-l", "-f", "start"]
            servers.append(Server("gdnsd", argv, port, work, args.server_cpus))
        for server in servers:
            server.wait_ready(args.start_timeout)
        if {"signed", "geoip"} <= features:
            # mod-geoip signs its answers with the zone's keys, which Knot makes only once it runs: at the
            # first start the module fails to load ("no keys for signing"); the second start has them.
            knot = servers[1]
            signed_by(knot, 20.0)
            knot.stop()
            servers[1] = Server("knot", [args.knotd, "-c", str(conf)], knot.port, work, args.server_cpus)
            servers[1].wait_ready(args.start_timeout)
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return ProfileServers(servers, work)


def signed_by(server: Server, timeout: float) -> bool:
    """Whether `server` answers rr A with an RRSIG (waiting up to `timeout` s: Knot signs after it starts)."""
    deadline = time.monotonic() + timeout
    while True:
        text = dig_text(server, "+dnssec", "+norec", f"rr.{ORIGIN}", "A")
        if re.search(r"\sRRSIG\s+A\s", text):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)


def full_cookie(server: Server) -> str:
    """The client cookie with the server cookie `server` returns for it (dig retries after BADCOOKIE)."""
    found = re.search(
        r"; COOKIE: ([0-9a-f]+)", dig_text(server, f"+cookie={CLIENT_COOKIE}", f"rr.{ORIGIN}", "A")
    )
    return found.group(1) if found else CLIENT_COOKIE


def dig_text(server: Server, *args: str) -> str:
    argv = ["dig", "+time=2", "+tries=2", "@127.0.0.1", "-p", str(server.port), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    return done.stdout


def burst(server: Server, count: int = 200) -> tuple[int, int]:
    """Send `count` rr A queries at once over UDP; (replies, truncated replies) within 1 s."""
    query = dns.message.make_query(f"rr.{ORIGIN}", "A")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        for i in range(count):
            query.id = i
            sock.sendto(query.to_wire(), ("127.0.0.1", server.port))
        replies = truncated = 0
        deadline = time.monotonic() + 1.0
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            try:
                data = sock.recv(4096)
            except TimeoutError:
                break
            replies += 1
            truncated += bool(data[2] & 0x02)
    return replies, truncated


def preflight(args: argparse.Namespace, profile: str, started: ProfileServers) -> list[str]:
    """Lines saying, per feature and server, that the feature is on (`ok`) or not (`FAIL`)."""
    features = PROFILES[profile]
    out: list[str] = []
    gslbd, knot = started.servers[0], started.servers[1]

    def line(ok: bool, text: str) -> None:
        out.append(f"  {'ok  ' if ok else 'FAIL'} {text}")

    for server in started.servers:
        answer = server.dig("A", f"rr.{ORIGIN}")
        line(bool(answer) and set(answer) <= set(ADDRESSES), f"{server.name}: rr A -> {' '.join(answer)}")
    for server in (gslbd, knot):
        if "cookies" in features:
            text = dig_text(server, "+cookie", f"rr.{ORIGIN}", "A")
            found = re.search(r"; COOKIE: ([0-9a-f]+)", text)
            ok = found is not None and len(found.group(1)) > 16
            line(
                ok,
                f"{server.name}: dig +cookie gets a server cookie back ({found.group(1) if found else '-'})",
            )
        if "nsid" in features:
            found = re.search(
                r"; NSID: .*\(\"?([^)\"]*)\"?\)", dig_text(server, "+nsid", f"rr.{ORIGIN}", "A")
            )
            line(found is not None, f"{server.name}: dig +nsid -> NSID {found.group(1) if found else '-'}")
        if "signed" in features:
            rrsig = signed_by(server, 20.0)
            nx = dig_text(server, "+dnssec", "+norec", f"nxname1.{ORIGIN}", "A")
            denial = bool(re.search(r"\s(NSEC|NSEC3)\s", nx))
            line(
                rrsig and denial,
                f"{server.name}: DO answers carry RRSIG A ({rrsig}) and NSEC denials ({denial})",
            )
        if "geoip" in features:
            seen = []
            for cidr, (_, site) in GEO_RECORDS.items():
                first = cidr.split(".")[0]
                answer = server.dig(f"+subnet={first}.7.8.0/24", "A", f"geo.{ORIGIN}")
                seen.append((answer == [ADDRESSES[site]], f"{first}.7.8.0/24->{','.join(answer) or '-'}"))
            line(
                all(ok for ok, _ in seen),
                f"{server.name}: GeoIP ECS outside topology " + " ".join(t for _, t in seen),
            )
    if "peers" in features:
        answer = gslbd.dig("SOA", f"_gslbd-exchange-eu.{ORIGIN}")
        line(bool(answer), f"gslbd: exchange zone _gslbd-exchange-eu.{ORIGIN} SOA served ({len(answer) > 0})")
        out.append("  n/a  knot, gdnsd: no peer exchange; measured plain")
    if "rrl" in features:
        low = start_profile(args, profile, started.work / "rrl-preflight", PREFLIGHT_RRL, with_gdnsd=False)
        try:
            for server in low.servers:
                replies, truncated = burst(server)
                line(
                    replies < 190 and truncated > 0,
                    f"{server.name} (limit {PREFLIGHT_RRL}/s, slip 2): a burst of 200 -> {replies} replies, "
                    f"{truncated} truncated",
                )
        finally:
            for server in low.servers:
                server.stop()
    if features:
        out.append("  n/a  gdnsd: none of these features; measured plain (its geoip plugin with `nets`)")
    return out


@dataclass(frozen=True)
class Cell:
    profile: str
    scenario: str
    server: str
    runs: tuple[Run, ...]
    error: str = ""

    @property
    def us(self) -> float | None:
        return statistics.median(r.us_per_query for r in self.runs) if self.runs else None


def allowed_rcodes(profile: str, scenario: str) -> set[str]:
    if scenario != "nx":
        return {"NOERROR"}
    # A signed gslbd zone answers a new name with an RFC 9824 compact denial (NOERROR, NXNAME)
    return {"NXDOMAIN", "NOERROR"} if "signed" in PROFILES[profile] else {"NXDOMAIN"}


def valid(run: Run, profile: str, max_lost: float) -> str:
    if run.lost_pct > max_lost:
        return f"lost {run.lost_pct:.2f}%"
    codes = {part.split()[0] for part in run.rcodes.split(",") if part.strip()}
    if not codes <= allowed_rcodes(profile, run.scenario):
        return f"rcodes {run.rcodes}"
    return ""


def scenario_of(profile: str, key: str, server: Server) -> Scenario:
    """The scenario as asked of `server`: DO in signed profiles; rrc with the full cookie (client and the
    server's own server cookie, as a resolver sends after its first exchange) where the server has cookies."""
    scenario = SCENARIOS[key]
    extra = scenario.dnsperf_args
    if key == "rrc" and server.name != "gdnsd" and "cookies" in PROFILES[profile]:
        extra = ("-E", f"10:{full_cookie(server)}")
    if "signed" in PROFILES[profile] and key != "geox":  # geox: DO is in the binary query file
        extra = (*extra, "-D")
    return Scenario(scenario.key, scenario.policy, extra, (), scenario.rcode, scenario.name)


def measure_profile(args: argparse.Namespace, profile: str, started: ProfileServers) -> list[Cell]:
    features = PROFILES[profile]
    opts = Options(args.seconds, args.warmup, args.calibrate, args.outstanding, args.client_cpu, started.work)
    do = "signed" in features
    cells: list[Cell] = []
    for key in PROFILE_SCENARIOS[profile]:
        queries = started.work / f"{key}.queries"
        if key == "geox":
            queries.write_bytes(geox_queries(do))
        scenarios = {server.name: scenario_of(profile, key, server) for server in started.servers}
        runs: dict[str, list[Run]] = {s.name: [] for s in started.servers}
        errors: dict[str, str] = {}
        for round_no in range(args.rounds):
            order = started.servers if round_no % 2 == 0 else started.servers[::-1]
            for server in order:
                if server.name in errors:
                    continue
                scenario = scenarios[server.name]
                try:
                    if opts.warmup:
                        dnsperf(server, scenario, opts, opts.warmup, args.rate)
                    run = dnsperf(server, scenario, opts, opts.seconds, args.rate)
                except BenchError as error:
                    errors[server.name] = str(error).splitlines()[0]
                    continue
                problem = valid(run, profile, args.max_lost)
                if problem:
                    errors[server.name] = problem
                else:
                    runs[server.name].append(run)
        for server in started.servers:
            cells.append(
                Cell(profile, key, server.name, tuple(runs[server.name]), errors.get(server.name, ""))
            )
    return cells


def perf_profile(args: argparse.Namespace, profile: str, started: ProfileServers, key: str) -> list[str]:
    """One extra (unmeasured) run of gslbd with `perf record` attached: where its CPU goes."""
    gslbd = started.servers[0]
    scenario = scenario_of(profile, key, gslbd)
    data = started.work / f"perf-{key}.data"
    opts = Options(args.seconds, 0, 0, args.outstanding, args.client_cpu, started.work)
    recorder = subprocess.Popen(
        ["perf", "record", "-q", "-F", "499", "-g", "-o", str(data), "-p", str(gslbd.proc.pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.3)  # perf attaching; not a synchronisation of the measurement (this run is not measured)
        dnsperf(gslbd, scenario, opts, min(args.seconds, 4.0), args.rate)
    finally:
        recorder.send_signal(2)
        recorder.wait(30)
    out = []
    for sort in ("dso", "sym"):
        done = subprocess.run(
            [
                "perf",
                "report",
                "-i",
                str(data),
                "--stdio",
                "--no-children",
                "--sort",
                sort,
                "-g",
                "none",
                "--percent-limit",
                "2",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        rows = [r.strip() for r in done.stdout.splitlines() if r.strip() and not r.startswith("#")]
        out.append(f"    by {sort}: " + "; ".join(" ".join(r.split()) for r in rows[:12]))
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def table(profile: str, cells: Sequence[Cell], plain: Sequence[Cell]) -> list[tuple[str, float, float]]:
    """Print the profile's table; return its (label, ratio, target) checks.

    `/plain` is gslbd's figure over its own in the plain profile, measured minutes earlier; on a shared
    machine the load drifts between profiles, so `/plain*` divides it by the same ratio of gdnsd, which
    serves the very same plain config in every profile (a control): the cost the features add, with the
    drift taken out. The RRL + cookies and dnstap targets are checked on `/plain*`."""
    by = {(c.scenario, c.server): c for c in cells}
    at_plain = {(c.scenario, c.server): c.us for c in plain}
    features = PROFILES[profile]
    print(
        f"\n{profile}: gslbd {' + '.join(sorted(features)) or 'plain'}; Knot with the same modules; "
        "gdnsd plain"
    )
    print(
        f"{'scenario':<30}{'gslbd µs':>9}{'knot µs':>9}{'gdnsd µs':>9}{'/knot':>7}{'/gdnsd':>8}"
        f"{'/plain':>8}{'/plain*':>8}  notes"
    )
    checks: list[tuple[str, float, float]] = []
    for key in PROFILE_SCENARIOS[profile]:
        g, k, d = (by[(key, name)] for name in ("gslbd", "knot", "gdnsd"))
        rk, rd = ratio(g.us, k.us), ratio(g.us, d.us)
        rp = rp_star = None
        if profile != "plain":
            rp = ratio(g.us, at_plain.get((key, "gslbd")))
            control = ratio(d.us, at_plain.get((key, "gdnsd")))
            rp_star = ratio(rp, control)
        notes = "; ".join(f"{c.server}: {c.error}" for c in (g, k, d) if c.error)

        def fmt(x: float | None, width: int, digits: int = 1) -> str:
            return f"{x:>{width}.{digits}f}" if x is not None else f"{'-':>{width}}"

        label = f"{key} ({SCENARIOS[key].policy})"
        print(
            f"{label:<30}{fmt(g.us, 9)}{fmt(k.us, 9)}{fmt(d.us, 9)}{fmt(rk, 7, 2)}{fmt(rd, 8, 2)}"
            f"{fmt(rp, 8, 2)}{fmt(rp_star, 8, 2)}  {notes}"
        )
        if rk is not None:
            checks.append((f"{profile} {key} gslbd/knot", rk, KNOT_TARGET))
        if profile == "plain" and rd is not None:
            checks.append((f"{profile} {key} gslbd/gdnsd", rd, GDNSD_TARGET))
        if rp_star is not None and profile == "internet":
            checks.append((f"{profile} {key} gslbd/plain* (RRL+cookies+NSID)", rp_star, INTERNET_TARGET))
        if rp_star is not None and profile == "dnstap":
            checks.append((f"{profile} {key} gslbd/plain* (dnstap)", rp_star, DNSTAP_TARGET))
    for label, value, target in checks:
        print(f"  {label} {value:.2f}, target <= {target}: {'met' if value <= target else 'NOT met'}")
    return checks


def tables_from_json(path: Path) -> int:
    """Print the tables of an earlier `--profiles ... --json FILE` again (with this file's columns)."""
    figures = json.loads(path.read_text())
    results: dict[str, list[Cell]] = {}
    for cell in figures["cells"]:
        runs = tuple(Run(**run) for run in cell["runs"])
        results.setdefault(cell["profile"], []).append(
            Cell(cell["profile"], cell["scenario"], cell["server"], runs, cell["error"])
        )
    print(f"{path}: {figures['date']}, fixed rate {figures['rate']} q/s")
    checks = [c for name, cells in results.items() for c in table(name, cells, results.get("plain", []))]
    missed = [c for c in checks if c[1] > c[2]]
    print(f"\ntargets: {len(checks) - len(missed)} of {len(checks)} met")
    return 1 if missed else 0


def dnstap_sizes(started: ProfileServers) -> str:
    sizes = []
    for name, path in (
        ("gslbd", started.work / "gslbd.dnstap"),
        ("knot", started.work / "knot" / "knot.dnstap"),
    ):
        sizes.append(f"{name} {path.stat().st_size if path.exists() else 0} bytes")
    return ", ".join(sizes)


def run_profiles(args: argparse.Namespace, workdir: Path) -> int:
    names = list(PROFILES) if args.profiles == "all-of-them" else args.profiles.split(",")
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        raise BenchError(f"unknown profile(s) {unknown}; known: {', '.join(PROFILES)} or all-of-them")
    if "plain" not in names and any(n in ("internet", "dnstap") for n in names):
        names.insert(0, "plain")  # the /plain ratios need it
    args.rate = args.rate or 20_000
    load = os.getloadavg()
    print(
        f"profiles {', '.join(names)}: fixed rate {args.rate} q/s, {args.seconds:g} s x {args.rounds} "
        f"round(s) after {args.warmup:g} s warm-up; servers on CPU {args.server_cpus}, dnsperf on CPU "
        f"{args.client_cpu}; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    results: dict[str, list[Cell]] = {}
    all_checks: list[tuple[str, float, float]] = []
    perf_lines: dict[str, list[str]] = {}
    for name in names:
        started = start_profile(args, name, workdir / name, MEASURED_RRL)
        try:
            print(f"\npre-flight {name}:")
            checks = preflight(args, name, started)
            print("\n".join(checks))
            if any("FAIL" in c for c in checks):
                print(f"dns_bench: warning: {name}: a feature is not on in some server (FAIL above)")
            results[name] = measure_profile(args, name, started)
            if "dnstap" in PROFILES[name]:
                sizes = dnstap_sizes(started)
                ok = " 0 bytes" not in sizes
                print(f"  {'ok  ' if ok else 'FAIL'} dnstap written during the runs: {sizes}")
            if args.perf:
                missed = table(name, results[name], results.get("plain", []))
                for key in dict.fromkeys(label.split()[1] for label, v, t in missed if v > t):
                    perf_lines[f"{name} {key}"] = perf_profile(args, name, started, key)
        finally:
            for server in started.servers:
                server.stop()
    print("\n==== tables (median µs of server CPU per answered query) ====")
    for name in names:
        all_checks += table(name, results[name], results.get("plain", []))
    if perf_lines:
        print("\nperf of gslbd where a target is missed (one extra run each, perf record -F 499 -g):")
        for label, lines in perf_lines.items():
            print(f"  {label}:")
            print("\n".join(lines))
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    missed = [c for c in all_checks if c[1] > c[2]]
    print(f"targets: {len(all_checks) - len(missed)} of {len(all_checks)} met")
    if args.json:
        figures = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "rate": args.rate,
            "cells": [asdict(c) | {"us": c.us} for c in (c for cells in results.values() for c in cells)],
            "checks": [{"label": n, "ratio": v, "target": t, "met": v <= t} for n, v, t in all_checks],
            "perf": perf_lines,
        }
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return 1 if args.require_target and missed else 0
