"""A brute-force fuzz loop for the C table (run by scripts/fuzz-c under ASan/UBSan; not a test).

Feeds millions of mutated queries (bit flips, byte sets, cuts, insertions, splices of other queries, taken
from the wire tests' seeds, the shed_load services' and the pools services') to `Table.answer` over the C
table's worlds (the wire tests' world, a geo world, shed_load on every policy, pools...), and compares
every `--compare`-th answer C gives with the slow path's (the oracle, tests/unit/wire/wire_support.py
`oracle`) for the same choice (what C leaves, Python answers); and to `Table.reject` (what the C
UDP loop answers to a datagram that cannot be a valid query), comparing every `--compare`-th rejection with
the slow path's answer (dnspython), and checking that nothing C answers is also rejected; and, every 16th
packet, a TCP stream of several of them (with cut and wrong length prefixes) to `TcpAnswerer.answer` (the
C TCP path, server/tcp.py), checking its framing, IDs and counts. Exits 1 on the first mismatch.

    python scripts/fuzz_cfast.py --packets 2000000
    python scripts/fuzz_cfast.py --streams 300000      # the TCP path alone
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "unit" / "wire"))

from pools_world import POOLS_SEEDS  # noqa: E402
from shed_world import SHED_SEEDS  # noqa: E402
from test_ctable import VIEWS  # noqa: E402
from test_wire_fuzz import SEEDS as WIRE_SEEDS  # noqa: E402
from wire_support import FixedDraw, oracle  # noqa: E402

from gslbd.wire import _cfast, compile_table  # noqa: E402
from gslbd.wire import ctable as ct  # noqa: E402
from gslbd.wire.slowpath import slow_response  # noqa: E402

# the wire tests' queries, the shed_load services' (shed entries) and the pools services' (pooled geo
# entries with geo, drawing and hashing pools, shed entries over them)
SEEDS = WIRE_SEEDS + SHED_SEEDS + POOLS_SEEDS


def mutate(rng: random.Random, packet: bytes) -> bytes:
    data = bytearray(packet)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(5)
        at = rng.randrange(len(data) + 1)
        if kind == 0 and data:
            data[at % len(data)] ^= 1 << rng.randrange(8)
        elif kind == 1 and data:
            data[at % len(data)] = rng.randrange(256)
        elif kind == 2:
            del data[at:]
        elif kind == 3:
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        else:
            other = rng.choice(SEEDS)
            data[at:] = other[rng.randrange(len(other) + 1) :]
    return bytes(data)


def check_stream(answerer: object, rng: random.Random, ip: int, v6: bool) -> str | None:
    """Feed a random pipelined stream to the C TCP path as server/tcp.py does; a problem found, or None."""
    messages = [mutate(rng, rng.choice(SEEDS)) for _ in range(rng.randint(1, 6))]
    wire = bytearray()
    for m in messages:
        size = len(m) if rng.random() < 0.9 else rng.randrange(65536)  # sometimes a wrong length
        wire += size.to_bytes(2, "big") + m
    if rng.random() < 0.3:
        del wire[rng.randrange(len(wire) + 1) :]
    pos = 0
    while True:
        out, after, answered, rcodes, pending = answerer.answer(wire, pos, ip, v6)  # type: ignore[attr-defined]
        if not pos <= after <= len(wire) or sum(n for _, n in rcodes) != answered:
            return f"bad position or counts after {wire.hex()}"
        replies, at = 0, 0
        while at < len(out):
            size = int.from_bytes(out[at : at + 2], "big")
            reply = out[at + 2 : at + 2 + size]
            if len(reply) != size or size < 12 or not reply[2] & 0x80:
                return f"bad frame in the answer to {wire.hex()}"
            at += 2 + size
            replies += 1
        if replies != answered:
            return f"{replies} frames for {answered} answers to {wire.hex()}"
        if not isinstance(pending, bytes):
            return None
        pos = after


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--packets", type=int, default=1_000_000)
    parser.add_argument("--compare", type=int, default=20, help="compare every Nth answer with Python")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--streams", type=int, default=0, help="only this many TCP streams, no packets")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tables = []
    for view in VIEWS.values():
        for ecs in (True, False):
            table = compile_table(view, max_udp_payload=rng.choice([512, 1232, 4096]), use_client_subnet=ecs)
            tables.append((view, table, ct.build_ctable(table).native))
    streams = random.Random(args.seed + 1)  # the TCP streams' own draws: the packets stay those of --seed
    answerers = []
    for _, _, native in tables:
        slot = ct.new_slot()
        slot.set(native)
        answerers.append(_cfast.TcpAnswerer(slot, streams.getrandbits(64)))
    started = time.monotonic()
    for n in range(args.streams):
        ip, v6 = (streams.getrandbits(128), True) if n % 3 == 0 else (streams.getrandbits(32), False)
        problem = check_stream(answerers[n % len(answerers)], streams, ip, v6)
        if problem is not None:
            print(problem, file=sys.stderr)
            return 1
    if args.streams:
        print(f"{args.streams} TCP streams, {time.monotonic() - started:.1f} s: no crash, no problem")
        return 0
    answered = rejected = 0
    for n in range(args.packets):
        view, table, native = tables[n % len(tables)]
        packet = mutate(rng, rng.choice(SEEDS)) if n % 8 else rng.randbytes(rng.randrange(64))
        ip, v6 = (rng.getrandbits(128), True) if n % 3 == 0 else (rng.getrandbits(32), False)
        tcp = bool(n & 1)
        if n % 16 == 0:
            problem = check_stream(answerers[n % len(tables)], streams, ip, v6)
            if problem is not None:
                print(problem, file=sys.stderr)
                return 1
        draw = rng.random()
        out = native.answer(packet, ip, v6, tcp, 0, draw)
        answered += out is not None
        reject = native.reject(packet)
        if reject is not None:
            rejected += 1
            if out is not None:
                print(f"C both answers and rejects {packet.hex()}", file=sys.stderr)
                return 1
            if rejected % args.compare == 0:
                slow = slow_response(
                    packet,
                    view,
                    ip,
                    v6,
                    tcp=False,
                    max_udp_payload=table.max_udp_payload,
                    use_client_subnet=table.use_client_subnet,
                    rng=random.Random(0),
                    seq=0,
                )
                if reject != (slow if slow is not None else False):
                    print(f"C rejects {packet.hex()} unlike the slow path", file=sys.stderr)
                    return 1
        if n % args.compare == 0 and out is not None:  # C used seq 0 and `draw`: the same choice
            python = oracle(view, table, packet, ip, v6, tcp, seq=0, rng=FixedDraw(draw))
            if out != python:
                print(f"mismatch on {packet.hex()} from {ip:#x} v6={v6} tcp={tcp}", file=sys.stderr)
                return 1
    took = time.monotonic() - started
    print(
        f"{args.packets} packets, {answered} answered in C, {rejected} rejected in C, {took:.1f} s:"
        " no crash, no mismatch"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
