"""The control plane at 1,000 to 100,000 services: check, start, memory, reload and one verdict.

For each size a config is generated (mixed policies: round_robin, failover, weighted, geo, random, hash;
3 IPv4 + 1 IPv6 endpoint per service, no checks) and a real `gslbd serve` process is measured:

    check s        wall time of `gslbd check`
    first answer s from starting `gslbd serve` to the first answer for the last service
    all compiled s from the start until every name is compiled (logged, and gslbd_dns_names_pending 0: past
                   20,000 names the services' names are compiled in steps after the first answer)
    RSS MB         resident memory once every name is compiled (VmRSS), and its peak (VmHWM)
    reload ms      a config that changes one service, applied by SIGHUP: until that
                   service's answer changes; `reload cpu s`: the server's CPU time for it
    change ms      one admin change (PUT .../admin down: the same book -> generation path as a verdict)
                   until the answer changes, seen from a DNS client (HTTP round trip included)
    verdict ms     in process: one recorded verdict to the next generation with the changed answer
                   (median of 50): the control plane's share of verdict -> answer

`--starts K` repeats `gslbd check` and the start to the first answer K more times per size (a fresh
process each time) and prints each figure, since the load varies from start to start.

`--shared` adds the config of N services over 1,000 HTTP backends (real loopback servers, one check
profile): it prints how many probe targets the server runs (one per distinct target) and how long a
backend failure takes to change an answer (probe interval + fall, then the verdict -> answer path).

    python bench/scale.py                         # 1,000 and 10,000 services
    python bench/scale.py --sizes 1000,10000,100000 --shared 100000
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import dns.message
import dns.query

from gslbd.server.build import EAGER_NAMES

POLICIES = ("round_robin", "failover", "weighted", "geo", "random", "hash")
SITES = ("eu", "us", "ap")
TOKEN = "bench-token"
ZONE = "gslb.example.com."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def header(port: int, api_port: int, checks: str = "") -> list[str]:
    return [
        "version: 1",
        "site: {name: eu, locality: {region: europe-west1, zone: europe-west1-b}}",
        f"dns: {{listen: ['127.0.0.1:{port}'], lame_duck: 0s}}",
        f"api: {{listen: '127.0.0.1:{api_port}', token: {TOKEN}}}",
        "zones:",
        f"  - origin: {ZONE}",
        f"    nameservers: [{{name: ns1.{ZONE}, address: 127.0.0.1}}]",
        "sites:",
        "  eu: {locality: {region: europe-west1, zone: europe-west1-b}, coordinates: [50.4, 3.8]}",
        "  us: {locality: {region: us-east1, zone: us-east1-b}, coordinates: [39.0, -77.5]}",
        "  ap: {locality: {region: asia-southeast1, zone: asia-southeast1-a}, coordinates: [1.35, 103.8]}",
        "topology:",
        "  networks: [{cidr: 10.1.0.0/16, site: eu}, {cidr: 10.2.0.0/16, site: us}]",
        *checks.splitlines(),
    ]


def mixed_services(n: int, change: int | None = None) -> list[dict[str, object]]:
    """N services of mixed policies; `change` gives that service's first endpoint another address."""
    out: list[dict[str, object]] = []
    for i in range(n):
        policy = POLICIES[i % len(POLICIES)]
        service: dict[str, object] = {"name": f"s{i}.{ZONE}", "policy": policy}
        if policy == "failover":
            service["failover_order"] = ["eu", "us", "ap"]
        if policy == "weighted":
            service["weights"] = {"eu": 70, "us": 20, "ap": 10}
        service["check"] = "none"
        a, b = (i >> 8) & 255, i & 255
        first = 99 if change == i else 10
        endpoints = [{"address": f"10.{first + j}.{a}.{b}", "site": site} for j, site in enumerate(SITES)]
        endpoints.append({"address": f"2001:db8::{i >> 16:x}:{i & 0xFFFF:x}", "site": "eu"})
        service["endpoints"] = endpoints
        out.append(service)
    return out


def block_lines(service: dict[str, object]) -> list[str]:
    """One service as an operator writes it in YAML: block style, lists of names in flow style."""

    def flow(value: object) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(map(flow, value)) + "]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
        return str(value)

    out: list[str] = []
    for key, value in service.items():
        lead = "  - " if not out else "    "
        if key == "endpoints" and isinstance(value, list):
            out.append(f"{lead}endpoints:")
            for endpoint in value:
                items = list(endpoint.items())
                out.append(f"      - {items[0][0]}: {items[0][1]}")
                out.extend(f"        {k}: {v}" for k, v in items[1:])
        else:
            out.append(f"{lead}{key}: {flow(value)}")
    return out


def write_config(path: Path, fmt: str, n: int, port: int, api_port: int, change: int | None = None) -> None:
    """The config of N mixed services at `path`: inline YAML (`yaml`, one flow mapping per service, as
    a generator writes JSON; `yaml-block`, block style, as an operator writes YAML) or a JSON Lines
    services file beside it (`jsonl`, `services_file`)."""
    services = mixed_services(n, change)
    out = header(port, api_port)
    if fmt == "jsonl":
        lines = [json.dumps(s, separators=(",", ":")) for s in services]
        beside = path.with_suffix(".jsonl")
        beside.write_text("\n".join(lines) + "\n")
        out.append(f"services_file: {beside.name}")
    elif fmt == "yaml-block":
        out.append("services:")
        for service in services:
            out.extend(block_lines(service))
    else:
        out.append("services:")
        out.extend(f"  - {json.dumps(s, separators=(',', ':'))}" for s in services)
    path.write_text("\n".join(out) + "\n")


def shared_config(n: int, port: int, api_port: int, backend_ports: list[int]) -> str:
    """N round_robin services over len(backend_ports) HTTP backends (all on 127.0.0.1, told apart by
    port through per-backend check profiles would defeat sharing, so each backend is its own address in
    127.0.0.0/8 on one port)."""
    port0 = backend_ports[0]
    checks = (
        f"checks:\n  web: {{type: http, port: {port0}, path: /, interval: 2s, timeout: 1s, rise: 1, fall: 1}}"
    )
    out = [*header(port, api_port, checks), "services:"]
    backends = len(backend_ports)
    for i in range(n):
        out.append(f"  - {{name: s{i}.{ZONE}, check: web, endpoints: [")
        for j in range(2):
            k = (i + j) % backends
            out.append(
                f"      {{address: 10.20.{k >> 8}.{k & 255}, probe_address: 127.1.{k >> 8}.{k & 255}}},"
            )
        out.append("    ]}")
    return "\n".join(out) + "\n"


def gslbd(*args: str) -> list[str]:
    return [sys.executable, "-m", "gslbd", *args]


def answer(port: int, name: str, timeout: float = 0.5) -> list[str] | None:
    query = dns.message.make_query(name, "A")
    try:
        reply = dns.query.udp(query, "127.0.0.1", port=port, timeout=timeout)
    except (dns.exception.Timeout, OSError):
        return None
    return sorted(rd.to_text() for rrset in reply.answer for rd in rrset)


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024
    return out


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def children_cpu() -> float:
    """CPU seconds of the waited-for child processes so far (a check's own, whatever the load)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def api(port: int, path: str, method: str = "GET", body: dict[str, str] | None = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=600) as reply:
        return int(reply.status)


def wait(condition: object, timeout: float, step: float = 0.002) -> float:
    """Seconds until `condition()` held (monotonic), or raise."""
    began = time.monotonic()
    while not condition():  # type: ignore[operator]
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"not within {timeout}s")
        time.sleep(step)
    return time.monotonic() - began


def measure(n: int, fmt: str, workdir: Path, timeout: float) -> dict[str, object]:
    port, api_port = free_port(), free_port()
    path = workdir / f"scale-{n}-{fmt}.yaml"
    write_config(path, fmt, n, port, api_port)
    began, children = time.monotonic(), children_cpu()
    checked = subprocess.run(
        gslbd("check", "--config", str(path)), capture_output=True, text=True, check=False
    )
    check_s = time.monotonic() - began
    check_cpu = children_cpu() - children
    if checked.returncode != 0:
        raise SystemExit(f"gslbd check failed:\n{checked.stdout}{checked.stderr}")
    last = f"s{n - 1}.{ZONE}"
    log = (workdir / f"scale-{n}.log").open("w")
    began = time.monotonic()
    proc = subprocess.Popen(gslbd("serve", "--config", str(path), "--log-level", "info"), stderr=log)
    try:
        wait(lambda: answer(port, last, 0.2) is not None, timeout, 0.05)
        first_s = time.monotonic() - began
        wait(lambda: accepts(api_port), timeout, 0.01)  # the admin API starts right after DNS
        # A large view is compiled in steps after the first answer (server/build.py): memory and the
        # changes below are measured once every name is compiled (its log line; /metrics would do, but
        # rendering 200,000 per-service series costs the server seconds each time).
        if 2 * n + 3 > EAGER_NAMES:  # a service's name and its localtargets name, apex, ns1, heartbeat
            wait(lambda: "every name is compiled" in (workdir / f"scale-{n}.log").read_text(), timeout, 0.2)
        whole_s = time.monotonic() - began
        memory = proc_status(proc.pid)
        # Reload: one service changes an address.
        index = (n // 2) // 6 * 6  # a round_robin service: every answer lists every address
        target = f"s{index}.{ZONE}"
        before = answer(port, target)
        write_config(path, fmt, n, port, api_port, change=index)
        cpu = cpu_seconds(proc.pid)
        began = time.monotonic()
        proc.send_signal(signal.SIGHUP)  # as an operator reloads
        wait(lambda: answer(port, target) != before, timeout)
        reload_s = time.monotonic() - began
        reload_cpu = cpu_seconds(proc.pid) - cpu
        # One admin change: the first endpoint of a round_robin service forced down.
        second = (n // 3) // 6 * 6  # another round_robin service than the reloaded one
        other = f"s{second}.{ZONE}"
        before = answer(port, other)
        address = f"10.10.{(second >> 8) & 255}.{second & 255}"
        began = time.monotonic()
        api(api_port, f"/api/v1/services/{other}/endpoints/{address}/admin", "PUT", {"state": "down"})
        wait(lambda: answer(port, other) != before, timeout, 0.0005)
        change_s = time.monotonic() - began
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        log.close()
    verdict_ms = measure_verdicts(path)
    return {
        "services": n,
        "format": fmt,
        "verdict_ms": verdict_ms,
        "check_s": check_s,
        "check_cpu_s": check_cpu,
        "first_answer_s": first_s,
        "whole_s": whole_s,
        "rss_mb": memory.get("VmRSS", 0),
        "peak_mb": memory.get("VmHWM", 0),
        "reload_ms": reload_s * 1000,
        "reload_cpu_s": reload_cpu,
        "change_ms": change_s * 1000,
    }


def measure_starts(n: int, fmt: str, workdir: Path, starts: int, timeout: float) -> dict[str, Any]:
    """`gslbd check` and start -> first answer for the last service, `starts` times (fresh processes)."""
    port, api_port = free_port(), free_port()
    path = workdir / f"starts-{n}-{fmt}.yaml"
    write_config(path, fmt, n, port, api_port)
    last = f"s{n - 1}.{ZONE}"
    checks: list[float] = []
    firsts: list[float] = []
    for _ in range(starts):
        began = time.monotonic()
        subprocess.run(gslbd("check", "--config", str(path)), capture_output=True, check=True)
        checks.append(time.monotonic() - began)
        began = time.monotonic()
        proc = subprocess.Popen(
            gslbd("serve", "--config", str(path)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait(lambda: answer(port, last, 0.2) is not None, timeout, 0.02)
            firsts.append(time.monotonic() - began)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    return {"services": n, "format": fmt, "check_s": checks, "first_answer_s": firsts}


def measure_verdicts(path: Path, count: int = 50) -> float:
    """In process: the median time from a recorded verdict to a committed-ready generation whose table
    answers the change (book.record -> GenerationBuilder.next), in ms: the control plane's share of
    "verdict -> changed answer" without the event loop's turn and the DNS round trip."""
    import random
    import statistics

    from gslbd.app.generation import GenerationBuilder, NewSnapshot, resolve
    from gslbd.config import load_config
    from gslbd.state.book import HealthBook
    from gslbd.state.status import EndpointStatus

    config = load_config(path)
    book = HealthBook()
    builder = GenerationBuilder()
    generation = builder.first(resolve(config, random.Random(1)), book.snapshot())
    while (filled := builder.fill(generation, 1.0)) is not None:  # as a server has after its start
        generation = filled
    book.take_touched()
    rng = random.Random(7)
    times = []
    for _ in range(count):
        service = rng.choice(config.services)
        key = service.endpoints[0].key
        began = time.perf_counter()
        book.record(key, EndpointStatus(healthy=not book.status(key).healthy))
        generation = builder.next(generation, NewSnapshot(book.snapshot(), book.take_touched()))
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def measure_shared(n: int, backends: int, workdir: Path, timeout: float) -> dict[str, float]:
    """N services over `backends` HTTP backends: the probe targets the server runs."""
    import http.server
    import threading

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    backend_port = free_port()
    servers = []
    for k in range(backends):
        server = http.server.ThreadingHTTPServer((f"127.1.{k >> 8}.{k & 255}", backend_port), Ok)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    port, api_port = free_port(), free_port()
    path = workdir / f"shared-{n}.yaml"
    path.write_text(shared_config(n, port, api_port, [backend_port] * backends))
    log_path = workdir / f"shared-{n}.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(gslbd("serve", "--config", str(path), "--log-level", "info"), stderr=log)
        try:
            wait(lambda: "ready:" in log_path.read_text(), timeout, 0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    with concurrent.futures.ThreadPoolExecutor(64) as pool:  # each shutdown waits for a poll interval
        list(pool.map(lambda server: server.shutdown(), servers))
    found = re.search(r"ready: (\d+) endpoints probed by (\d+) probes", log_path.read_text())
    if found is None:
        raise SystemExit(f"no ready line in {log_path}")
    return {"services": n, "backends": backends, "endpoints": int(found[1]), "probes": int(found[2])}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated service counts")
    parser.add_argument(
        "--shared", type=int, default=0, help="services for the shared-backends run (0: skip)"
    )
    parser.add_argument("--backends", type=int, default=1000)
    parser.add_argument(
        "--formats",
        default="yaml,jsonl",
        help="services inline (yaml: a flow mapping per service; yaml-block: block style) and/or in a "
        "services_file (jsonl)",
    )
    parser.add_argument("--starts", type=int, default=0, help="more starts per size, check and first answer")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    rows = []
    repeated: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gslbd-scale-") as tmp:
        for n in (int(x) for x in args.sizes.split(",") if x):
            for fmt in args.formats.split(","):
                rows.append(measure(n, fmt, Path(tmp), args.timeout))
                print(json.dumps(rows[-1]), flush=True)
                if args.starts:
                    repeated.append(measure_starts(n, fmt, Path(tmp), args.starts, args.timeout))
                    print(json.dumps(repeated[-1]), flush=True)
        shared = measure_shared(args.shared, args.backends, Path(tmp), args.timeout) if args.shared else None
    print()
    print(
        "| services | format | check s (CPU s) | first answer s | all compiled s | RSS MB (peak) "
        "| reload ms (CPU s) "
        "| admin change ms | verdict ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['services']:,} | {r['format']} | {r['check_s']:.1f} ({r['check_cpu_s']:.1f}) | "
            f"{r['first_answer_s']:.1f} | "
            f"{r['whole_s']:.1f} | "
            f"{r['rss_mb']:.0f} ({r['peak_mb']:.0f}) | {r['reload_ms']:.0f} ({r['reload_cpu_s']:.2f}) | "
            f"{r['change_ms']:.1f} | {r['verdict_ms']:.2f} |"
        )
    for r in repeated:
        checks = ", ".join(f"{t:.1f}" for t in r["check_s"])
        firsts = ", ".join(f"{t:.1f}" for t in r["first_answer_s"])
        label = f"{r['services']:,} {r['format']}, {args.starts} more starts"
        print(f"\n{label}: check s {checks}; first answer s {firsts}")
    if shared is not None:
        print(
            f"\nshared backends: {shared['services']:,} services, {shared['endpoints']:,} probed endpoints "
            f"over {shared['backends']:,} backends -> {shared['probes']:,} probes"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"sizes": rows, "starts": repeated, "shared": shared}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
