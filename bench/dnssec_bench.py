"""DNSSEC cost: CPU per answered query signed vs unsigned, the NSEC chain, and signing at startup.

    python bench/dnssec_bench.py [--queries 50000] [--rounds 7] [--services 10000] [--chain-names 100000]

Per query: ns through `Responder.handle` (the query path of every listener), the same query with DO
against the zone signed and against the same zone unsigned, built in this invocation; the ratio is
signed / unsigned (issue 11's target: at most 1.3). Scenarios: round_robin A, geo with ECS, and an
NXDOMAIN flood, both of one repeated name (its compact denial signed once, then cached) and of names
never asked before (RFC 9824's NSEC is owned by the query name: the zone signs `denial_signing_rate` of
them per second and answers the others from its pre-signed NSEC chain, wire/denial.py), one label below
the apex and two (below a service), with the default rate and with rate 0 (always the chain), and with
RFC 9824's CO flag. With the C extension both responders answer from the C table (GSLBD_NATIVE=0: both in
Python); the signed one asks Python for what only Python does (a fresh compact denial within the budget).
The chain alone at `--chain-names` names: signing it, finding a name's denial, one name added.
Startup: a full build (view + table) of `--services` services, unsigned and signed, and the number of
signatures made. Not a test: it prints figures (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.name

from gslbd.config import load_config_text
from gslbd.config.dnssec import generate_key_pair, read_key_pair
from gslbd.model.config import Config
from gslbd.model.dnssec import Dnssec
from gslbd.policy.locate import build_env
from gslbd.server.build import AnswerBuilder
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder, ctable
from gslbd.wire.denial import build_chain
from gslbd.wire.dnssec import CO, Signer

ORIGIN = "bench.example."
CLIENT = (0xCB007105, False)


def make_config(services: int, keys: list[Path] | None, denial_rate: int | None = None) -> Config:
    rate = f", denial_signing_rate: {denial_rate}" if denial_rate is not None else ""
    dnssec = f"    dnssec: {{keys: [{', '.join(str(k) for k in keys)}]{rate}}}" if keys else ""
    lines = [
        "version: 1",
        "site: {name: eu}",
        "zones:",
        f"  - origin: {ORIGIN}",
        f"    nameservers: [{{name: ns1.{ORIGIN}, address: 192.0.2.53}}]",
        dnssec,
        "sites: {eu: {coordinates: [50.4, 3.8]}, us: {coordinates: [39.0, -77.5]},",
        "        ap: {coordinates: [1.3, 103.8]}}",
        "topology:",
        "  use_client_subnet: true",
        "  networks:",
        "    - {cidr: 10.1.0.0/16, site: eu}",
        "    - {cidr: 10.2.0.0/16, site: us}",
        "    - {cidr: 10.3.0.0/16, site: ap}",
        "services:",
        f"  - {{name: rr.{ORIGIN}, check: none, endpoints: [{{address: 192.0.2.1}}, {{address: 192.0.2.2}}, "
        "{address: 192.0.2.3}]}",
        f"  - {{name: geo.{ORIGIN}, policy: geo, check: none, endpoints: [{{address: 192.0.2.1, site: eu}}, "
        "{address: 192.0.2.2, site: us}, {address: 192.0.2.3, site: ap}]}",
    ]
    for i in range(services):
        lines.append(
            f"  - {{name: s{i}.{ORIGIN}, check: none, endpoints: [{{address: 10.{i // 250}.{i % 250}.1}}, "
            f"{{address: 10.{i // 250}.{i % 250}.2, site: us}}, {{address: '2001:db8::{i:x}'}}]}}"
        )
    return load_config_text("\n".join(lines) + "\n")


def build(config: Config) -> tuple[Responder, AnswerBuilder, float]:
    builder = AnswerBuilder()
    began = time.process_time()
    view, table = builder.build(config, Snapshot(), build_env(config, random.Random(1)))
    return Responder(table, view, random.Random(7)), builder, time.process_time() - began


def query(name: str, ecs: str | None = None, co: bool = False) -> bytes:
    msg = dns.message.make_query(name, "A", want_dnssec=True)
    msg.flags = dns.flags.Flag(dns.flags.RD)
    options = [dns.edns.ECSOption.from_text(ecs)] if ecs else []
    msg.use_edns(0, dns.flags.DO | (CO if co else 0), 1232, options=options)
    return msg.to_wire()


def cpu_ns(handle: object, wires: list[bytes], rounds: int) -> float:
    """CPU ns per query (process time, so other load on the machine counts less), best of `rounds`
    passes over `wires`."""
    ip, v6 = CLIENT
    best = float("inf")
    for _ in range(rounds):
        began = time.process_time()
        for wire in wires:
            handle(wire, ip, v6)  # type: ignore[operator]
        best = min(best, (time.process_time() - began) / len(wires) * 1e9)
    return best


def chain_figures(keys: list[Path], count: int) -> None:
    """The NSEC chain of a zone of `count` names alone (wire/denial.py): signing it, the query path's
    lookup of a nonexistent name one and two labels below the apex (`NsecChain.cover`, what the slow
    path asks past the budget), and an incremental change of one name."""
    settings = Dnssec(tuple(read_key_pair(k, ORIGIN) for k in keys), denial_signing_rate=0)
    signer = Signer({ORIGIN: settings}, time.time)
    zone = signer.zones[ORIGIN]
    names = {(): (2, 6, 48)} | {(f"s{i}".encode(),): (1, 5, 28) for i in range(count)}
    began = time.process_time()
    chain = build_chain(signer, zone, 60, names)
    built = time.process_time() - began
    print(
        f"NSEC chain of {count} names: signed in {built:.2f} s of CPU ({built / count * 1e6:.0f} us a name)"
    )
    rng = random.Random(5)
    for label, parent in (("one label", ""), ("two labels", "s{}.")):
        wires = []
        for _ in range(20_000):
            text = f"x{rng.randrange(1 << 30)}.{parent.format(rng.randrange(count))}{ORIGIN}"
            wire = dns.name.from_text(text).to_wire() or b""
            wires.append(wire)
        best = float("inf")
        for _ in range(5):
            began = time.process_time()
            for wire in wires:
                chain.cover(wire)
            best = min(best, (time.process_time() - began) / len(wires) * 1e9)
        print(f"  a nonexistent name {label} below the apex: {best:.0f} ns to find its links (Python)")
    began = time.process_time()
    chain.updated(signer, zone, {(b"new-name",): (1,)})
    print(f"  one name added: {(time.process_time() - began) * 1e3:.1f} ms of CPU (two links signed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=50_000, help="queries per pass")
    parser.add_argument("--rounds", type=int, default=7, help="passes per figure (the best counts)")
    parser.add_argument("--services", type=int, default=10_000, help="services for the startup figure")
    parser.add_argument("--chain-names", type=int, default=100_000, help="names in the NSEC chain figure")
    parser.add_argument(
        "--startup-rounds", type=int, default=2, help="full builds of each kind (the best counts)"
    )
    args = parser.parse_args()
    keydir = Path(tempfile.mkdtemp(prefix="gslbd-bench-keys-"))
    keys = [generate_key_pair(ORIGIN, 13, True, keydir), generate_key_pair(ORIGIN, 13, False, keydir)]
    n = args.queries
    cases = [
        ("round_robin A", [query(f"rr.{ORIGIN}")] * n),
        (
            "geo A + ECS",
            [query(f"geo.{ORIGIN}", ecs=f"10.{1 + i % 3}.{i % 250}.0/24") for i in range(300)] * (n // 300),
        ),
        ("NXDOMAIN, one name", [query(f"no-such-name.{ORIGIN}")] * n),
    ]
    print(f"C answer table: {'on' if ctable.enabled() else 'off (both responders in Python)'}")
    print(f"{'query (DO set)':<22} {'unsigned ns/q':>14} {'signed ns/q':>12} {'ratio':>7}")
    for label, wires in cases:
        plain, _, _ = build(make_config(0, None))
        signed, _, _ = build(make_config(0, keys))
        figures = [float("inf"), float("inf")]
        for _ in range(args.rounds):  # interleaved, so that both see the same load
            for i, responder in enumerate((plain, signed)):
                figures[i] = min(figures[i], cpu_ns(responder.handle, wires, 1))
        for responder in (plain, signed):
            assert responder.slow_count == 0, f"{label} fell to the slow path"
        print(f"{label:<22} {figures[0]:>14.0f} {figures[1]:>12.0f} {figures[1] / figures[0]:>6.2f}x")
    # A flood of names never asked before: each pass asks new ones, so that no pass is answered from
    # the cache of compact denials. The signed zone signs at most `denial_signing_rate` (per second)
    # of them and answers the others from its pre-signed NSEC chain; with rate 0 always the chain.
    # The passes run back to back (queries made beforehand), as a sustained flood: the bucket fills
    # only while the unsigned pass runs, at `denial_signing_rate` per second of wall time.
    size = min(n, 20_000)
    floods = [
        ("NXDOMAIN, new names", None, "{}." + ORIGIN, False),
        ("  same, rate 0 (chain)", 0, "{}." + ORIGIN, False),
        ("  new names below rr", None, "{}.rr." + ORIGIN, False),
        ("  with CO flag", None, "{}." + ORIGIN, True),
    ]
    for label, rate, pattern, co in floods:
        plain, _, _ = build(make_config(0, None))
        signed, _, _ = build(make_config(0, keys, rate))
        passes = [
            [query(pattern.format(f"r{r}-n{i}"), co=co) for i in range(size)] for r in range(args.rounds)
        ]
        figures = [float("inf"), float("inf")]
        for flood in passes:  # a fresh compact denial within the budget is signed by the slow path
            for i, responder in enumerate((plain, signed)):
                figures[i] = min(figures[i], cpu_ns(responder.handle, flood, 1))
        print(f"{label:<22} {figures[0]:>14.0f} {figures[1]:>12.0f} {figures[1] / figures[0]:>6.2f}x")
    print()
    chain_figures(keys, args.chain_names)
    print()
    print(f"startup, {args.services} services (3 endpoints each, A and AAAA), CPU seconds of a full build:")
    unsigned_config, signed_config = make_config(args.services, None), make_config(args.services, keys)
    unsigned_s = signed_s = float("inf")
    made = 0
    for _ in range(args.startup_rounds):  # interleaved, best of each
        unsigned_s = min(unsigned_s, build(unsigned_config)[2])
        _, builder, seconds = build(signed_config)
        signed_s = min(signed_s, seconds)
        made = builder.signer.signatures_made if builder.signer is not None else 0
    print(
        f"  unsigned {unsigned_s:.2f} s, signed {signed_s:.2f} s ({made} signatures, "
        f"{(signed_s - unsigned_s) / max(made, 1) * 1e6:.0f} us of CPU per signature with its compilation)"
    )


if __name__ == "__main__":
    main()
