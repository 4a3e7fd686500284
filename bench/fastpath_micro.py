"""Micro-benchmark of the query path: ns per query through Responder.handle (the C table answers; a
build without the C extension measures the slow path twice) and through slow_response (the dnspython slow
path), for a few typical queries; then malformed messages through a Python-only Responder.handle
(wire/precheck.py answers them before dnspython) next to slow_response (dnspython's parse failing) and as
a ratio to a valid answer of the same responder (the slow path's).
Run: python bench/fastpath_micro.py

Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections.abc import Callable, Iterator

import dns.edns
import dns.flags
import dns.message
import dns.name

from gslbd.answer import View, build_view
from gslbd.model.config import Config
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Nameserver, Soa, Zone
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.state.snapshot import Snapshot
from gslbd.types import EndpointKind, PolicyName
from gslbd.wire import AnswerTable, Responder, compile_table, slow_response

ORIGIN = "gslb.example.com."
CLIENT = (0xCB007105, False)  # 203.0.113.5


def world() -> View:
    def service(label: str, policy: PolicyName, *addresses: str) -> Service:
        name = f"{label}.{ORIGIN}"
        eps = tuple(Endpoint(name, a, EndpointKind.IPV4, "eu") for a in addresses)
        return Service(name, ORIGIN, label, policy=policy, endpoints=eps)

    zone = Zone(
        ORIGIN,
        30,
        30,
        Soa("ns1.gslb.example.com.", "hostmaster.example.com.", 1),
        (Nameserver("ns1.gslb.example.com.", ("192.0.2.53",)),),
    )
    services = (
        service("app", PolicyName.ROUND_ROBIN, "192.0.2.1", "192.0.2.2", "192.0.2.3"),
        service("sticky", PolicyName.HASH, "198.51.100.1", "198.51.100.2", "198.51.100.3"),
    )
    config = Config(zones=(zone,), services=services)
    return build_view(config, Snapshot(), PolicyEnv(NoLocator(), {}, random.Random(1)))


def query(name: str, *, edns: bool = False, ecs: str | None = None) -> bytes:
    msg = dns.message.make_query(name, "A")
    msg.flags = dns.flags.Flag(dns.flags.RD)
    if edns or ecs:
        options = [dns.edns.ECSOption.from_text(ecs)] if ecs else []
        msg.use_edns(0, 0, 1232, options=options)
    return msg.to_wire()


def per_query_ns(call: Callable[[], object], seconds: float, repeats: int = 5) -> float:
    """The best of `repeats` timed loops (each about `seconds` long), in ns per call."""
    loops = 100
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            call()
        if time.perf_counter() - start >= seconds / 10:
            break
        loops *= 2
    loops = max(loops * 10, 1)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            call()
        best = min(best, (time.perf_counter() - start) / loops * 1e9)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=0.5, help="minimum time per measurement")
    args = parser.parse_args()
    view = world()
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    responder = Responder(table, view, random.Random(7))
    handle = responder.handle
    ip, v6 = CLIENT
    cases = {
        "A, no EDNS": query("App.gslb.example.com."),
        "A, EDNS": query("app.gslb.example.com.", edns=True),
        "A, EDNS+ECS (hash)": query("sticky.gslb.example.com.", ecs="10.1.2.0/24"),
        "NXDOMAIN": query("no-such-name.gslb.example.com."),
        "REFUSED": query("www.example.net."),
    }
    rng = random.Random(7)
    print(f"{'query':<22} {'C ns/q':>10} {'slow ns/q':>10} {'ratio':>7}")
    for label, wire in cases.items():
        before = responder.slow_count
        fast = per_query_ns(lambda w=wire: handle(w, ip, v6), args.seconds)
        assert responder.slow_count == before, f"{label} fell to the slow path"

        def slow(w: bytes = wire) -> object:
            return slow_response(
                w, view, ip, v6, tcp=False, max_udp_payload=1232, use_client_subnet=True, rng=rng, seq=0
            )

        slow_ns = per_query_ns(slow, args.seconds)
        print(f"{label:<22} {fast:>10.0f} {slow_ns:>10.0f} {slow_ns / fast:>6.1f}x")
    malformed_cases(view, table, args.seconds)


def malformed_cases(view: View, table: AnswerTable, seconds: float) -> None:
    python = Responder(table, view, random.Random(7), native=False)
    ip, v6 = CLIENT
    valid = query("app.gslb.example.com.", edns=True)
    valid_ns = per_query_ns(lambda: python.handle(valid, ip, v6), seconds)
    noise = random.Random(3)
    garbage = [bytes(noise.getrandbits(8) & (0x7F if i == 2 else 0xFF) for i in range(64)) for _ in range(64)]
    cases: dict[str, list[bytes]] = {
        "random 64 bytes": garbage,
        "trailing junk": [valid + b"junk"],
        "ANCOUNT past the end": [valid[:6] + b"\x00\x05" + valid[8:]],
        "forward pointer": [valid[:12] + b"\x03app\xc0\x40\x00\x01\x00\x01"],
    }
    print(f"\nPython-only handle, valid answer (EDNS): {valid_ns:.0f} ns/q")
    print(f"{'malformed':<22} {'handle ns':>10} {'dnspython':>10} {'vs valid':>9}")
    for label, packets in cases.items():
        cycle = itertools.cycle(packets)
        before = python.slow_count

        def handle(c: Iterator[bytes] = cycle) -> object:
            return python.handle(next(c), ip, v6)

        ns = per_query_ns(handle, seconds)
        assert python.slow_count == before, f"{label} reached the slow path"

        def parse(c: Iterator[bytes] = cycle) -> object:
            return slow_response(
                next(c), view, ip, v6, tcp=False, max_udp_payload=1232, use_client_subnet=True,
                rng=random.Random(1), seq=0,
            )  # fmt: skip

        parse_ns = per_query_ns(parse, seconds)
        print(f"{label:<22} {ns:>10.0f} {parse_ns:>10.0f} {ns / valid_ns:>8.2f}x")


if __name__ == "__main__":
    main()
