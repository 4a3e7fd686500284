#!/usr/bin/env python3
"""Server CPU per malformed datagram against CPU per valid answer, in one run: what a flood of datagrams
that cannot be valid queries costs (issue 19: about 40 times a valid query before C rejected them).

Run on demand, not by the test suite (needs taskset and dig; uses bench/dns_bench.py's parts):

    .venv/bin/python bench/malformed_bench.py --seconds 5 --rounds 3

One gslbd with a production-shaped config: every policy, a signed zone (the DO queries of the valid mix),
RRL (rates no client reaches, so every response passes through the limiter and is sent), cookies, NSID
(`dns.identity`), a TSIG peer, an HTTP check against a local HTTP server, a state file; and, with
`--plain`, a second gslbd without RRL and cookies (the C table answers valid queries itself). gslbd is
pinned to --server-cpus, the sender to --client-cpu. Each round sends, at one fixed rate from one socket,
valid queries (a mix of every policy, EDNS, ECS, DO, cookies), then malformed datagrams of several kinds
(cut in the name, bytes after the last record, counts with no records, a header alone, NXNAME, a bad label
type, QDCOUNT 2, a cut IQUERY, random bytes), alternating which goes first. The figure: the server's CPU
time over a run (all threads, from /proc/PID/task/*/schedstat) divided by the valid answers received, or
by the malformed datagrams sent; the ratio malformed / valid uses the medians. Target: <= 2.
Exit status 1 with --require-target when a ratio is above it, 2 when no valid figure could be made (a
server did not start, or over 1% of the valid queries got no answer: the rate is above what it can take).
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import os
import random
import shlex
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import dns.edns
import dns.message
from dns_bench import GSLBD_CONFIG, BenchError, Server, free_port

TARGET = 2.0
ORIGIN = "bench.example."

EXTRA = """\
site: {{name: eu}}
peers:
  sites: [{{name: us, nameservers: ["127.0.0.1:{peer_port}"]}}]
  interval: 10s
  tsig: {{name: exchange., secret: {tsig}}}
state: {{file: state.json}}
checks:
  web: {{type: http, port: {http_port}, path: /healthz, interval: 5s}}
"""


def production_config(port: int, http_port: int, peer_port: int, key: str, guarded: bool) -> str:
    text = GSLBD_CONFIG.format(port=port, workers=1)
    dns_extra = 'identity: "bench-{worker}", version: "bench"'
    if guarded:
        dns_extra += ", rrl: {responses_per_second: 1000000, errors_per_second: 1000000}, cookies: {}"
    text = text.replace("workers: 1}", f"workers: 1, {dns_extra}}}")
    text = text.replace(
        "    nameservers: [{name: ns1.bench.example., address: 127.0.0.1}]",
        f"    nameservers: [{{name: ns1.bench.example., address: 127.0.0.1}}]\n    dnssec: {{keys: [{key}]}}",
    )
    text = text.replace(
        "services:\n",
        "services:\n  - {name: web, policy: round_robin, check: web, endpoints: [{address: 127.0.0.1}]}\n",
        1,
    )
    secret = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"
    return text + EXTRA.format(peer_port=peer_port, tsig=secret, http_port=http_port)


def valid_queries(count: int, rng: random.Random) -> list[bytes]:
    """A mix over every policy: plain, EDNS with ECS, DO (signed answers), a client cookie, NSID."""
    cookie = dns.edns.GenericOption(dns.edns.OptionType.COOKIE, bytes.fromhex("2464c4abcf10c957"))
    ecs = dns.edns.ECSOption("10.1.0.0", 24)
    shapes = [
        ("rr", {}),
        ("wt", {"use_edns": 0, "options": [ecs]}),
        ("fo", {"use_edns": 0}),
        ("geo", {"use_edns": 0, "options": [ecs]}),
        ("hash", {"use_edns": 0, "options": [ecs]}),
        ("rr", {"want_dnssec": True}),
        ("wt", {"use_edns": 0, "options": [cookie]}),
        ("fo", {"use_edns": 0, "options": [dns.edns.NSIDOption(b"")]}),
    ]
    out = []
    for i in range(count):
        label, kw = shapes[i % len(shapes)]
        msg = dns.message.make_query(f"{label}.{ORIGIN}", "A", id=rng.getrandbits(16), **kw)  # type: ignore[arg-type]
        out.append(msg.to_wire())
    return out


def malformed_datagrams(count: int, rng: random.Random) -> list[bytes]:
    """Datagrams that cannot be valid queries, of several kinds (see the module docstring)."""
    good = dns.message.make_query(f"rr.{ORIGIN}", "A").to_wire()
    opt = b"\x00\x00\x29\x04\xd0\x00\x00\x80\x00\x00\x00"

    def kind(i: int) -> bytes:
        qid = struct.pack("!H", rng.getrandbits(16))
        body = good[2:]
        which = i % 9
        if which == 0:
            return qid + body[:12]  # cut in the name
        if which == 1:
            return qid + body + b"junk"
        if which == 2:
            return qid + body[:8] + b"\x00\x02" + body[10:]  # ARCOUNT 2, no record
        if which == 3:
            return qid + b"\x01\x00" + bytes(8)  # a header alone
        if which == 4:
            return qid + body[:8] + b"\x00\x01" + body[10:-4] + b"\x00\x80\x00\x01" + opt  # NXNAME
        if which == 5:
            return qid + body[:10] + b"\x83rr\x80\x00\x00\x01\x00\x01"  # label type 0x80
        if which == 6:
            return qid + b"\x01\x00\x00\x02" + bytes(6) + body[10:] + body[10:]  # QDCOUNT 2
        if which == 7:
            return qid + b"\x09\x00" + body[2:14]  # IQUERY, cut
        data = bytearray(rng.randbytes(rng.randrange(12, 200)))
        data[2] &= 0x7F  # a query: QR set would be dropped
        return bytes(data)

    return [kind(i) for i in range(count)]


@dataclass(frozen=True)
class Flood:
    server: str
    kind: str
    sent: int
    received: int
    cpu: float  # server CPU seconds over the run

    @property
    def per_datagram(self) -> float:
        """Microseconds of server CPU per valid answer (valid) or per datagram sent (malformed)."""
        count = self.received if self.kind == "valid" else self.sent
        return self.cpu / max(1, count) * 1e6


def flood(server: Server, kind: str, payloads: list[bytes], rate: int, seconds: float, cpu: str) -> Flood:
    """Send `payloads` (cycled) at `rate` per second for `seconds` from one socket (pinned to `cpu`),
    counting the replies; the server's CPU time over the run."""
    os.sched_setaffinity(0, {int(c) for c in cpu.split(",")})
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
    sock.connect(("127.0.0.1", server.port))
    received = 0
    done = threading.Event()

    def receive() -> None:
        nonlocal received
        sock.settimeout(0.2)
        while not done.is_set():
            try:
                sock.recv(65535)
                received += 1
            except TimeoutError:
                continue
            except OSError:
                return

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    total = int(rate * seconds)
    before = server.cpu().precise
    started = time.monotonic()
    step = max(1, rate // 1000)  # a burst per millisecond
    for n in range(0, total, step):
        for p in range(n, min(total, n + step)):
            with contextlib.suppress(OSError):
                sock.send(payloads[p % len(payloads)])
        lag = started + (n + step) / rate - time.monotonic()
        if lag > 0:
            time.sleep(lag)
    time.sleep(0.3)  # the last replies
    cpu_used = server.cpu().precise - before
    done.set()
    reader.join()
    sock.close()
    return Flood(server.name, kind, total, received, cpu_used)


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


def start(name: str, args: argparse.Namespace, workdir: Path, guarded: bool, http_port: int) -> Server:
    taken: set[int] = {http_port}
    port = free_port(taken)
    key = keygen(workdir / name)
    text = production_config(port, http_port, free_port(taken | {port}), str(key), guarded)
    config = workdir / name / "gslbd.yaml"
    config.write_text(text)
    argv = [part.format(config=config, port=port) for part in shlex.split(args.gslbd_cmd)]
    server = Server(name, argv, port, workdir / name, args.server_cpus)
    server.wait_ready(args.start_timeout)
    if not server.dig(f"rr.{ORIGIN}", "A"):
        raise BenchError(f"{name} does not answer rr.{ORIGIN}:\n{server.log_tail()}")
    return server


def keygen(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "gslbd", "dnssec", "keygen", "--zone", ORIGIN, "--dir", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise BenchError(f"gslbd dnssec keygen failed: {done.stderr}")
    return Path(done.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=5000, help="datagrams per second of every run")
    parser.add_argument("--plain", action="store_true", help="also a gslbd without RRL and cookies")
    parser.add_argument("--server-cpus", default="1")
    parser.add_argument("--client-cpu", default="0")
    parser.add_argument(
        "--gslbd-cmd", default=f"{shlex.quote(sys.executable)} -m gslbd serve --config {{config}}"
    )
    parser.add_argument("--start-timeout", type=float, default=30.0)
    parser.add_argument("--require-target", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(19)
    kinds = {"valid": valid_queries(4000, rng), "malformed": malformed_datagrams(4000, rng)}
    health = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=health.serve_forever, daemon=True).start()
    runs: list[Flood] = []
    with tempfile.TemporaryDirectory(prefix="malformed-bench-") as tmp:
        workdir = Path(tmp)
        servers: list[Server] = []
        try:
            servers.append(start("production", args, workdir, True, health.server_address[1]))
            if args.plain:
                servers.append(start("plain", args, workdir, False, health.server_address[1]))
            time.sleep(1.0)  # the first checks and signatures settle
            for round_no in range(args.rounds):
                for server in servers:
                    order = ("valid", "malformed") if round_no % 2 == 0 else ("malformed", "valid")
                    for kind in order:
                        runs.append(
                            flood(server, kind, kinds[kind], args.rate, args.seconds, args.client_cpu)
                        )
                        if server.proc.poll() is not None:
                            raise BenchError(f"{server.name} exited:\n{server.log_tail()}")
        except BenchError as error:
            print(f"malformed_bench: {error}", file=sys.stderr)
            return 2
        finally:
            for server in servers:
                server.stop()
            health.shutdown()
    print(f"{args.rate:,} datagrams/s from one socket, {args.rounds} x {args.seconds:g} s per kind:")
    worst = 0.0
    for name in dict.fromkeys(r.server for r in runs):
        medians = {}
        for kind in ("valid", "malformed"):
            mine = [r for r in runs if r.server == name and r.kind == kind]
            medians[kind] = statistics.median(r.per_datagram for r in mine)
            answered = sum(r.received for r in mine) / max(1, sum(r.sent for r in mine))
            figures = ", ".join(f"{r.per_datagram:.2f}" for r in mine)
            print(
                f"  {name:10} {kind:9} {medians[kind]:7.2f} us/datagram  "
                f"({answered:.1%} answered; runs: {figures})"
            )
        lost = [r for r in runs if r.server == name and r.kind == "valid" and r.received < 0.99 * r.sent]
        if lost:
            print(f"malformed_bench: {name} lost over 1% of the valid answers: lower --rate", file=sys.stderr)
            return 2
        if medians["valid"] <= 0:
            print(f"malformed_bench: no CPU measured for {name}", file=sys.stderr)
            return 2
        ratio = medians["malformed"] / medians["valid"]
        worst = max(worst, ratio)
        print(f"  {name:10} ratio malformed / valid: {ratio:.2f}  (target <= {TARGET:g})")
    return 1 if args.require_target and worst > TARGET else 0


if __name__ == "__main__":
    raise SystemExit(main())
