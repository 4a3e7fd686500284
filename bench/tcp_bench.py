#!/usr/bin/env python3
"""Server time per pipelined TCP query inside one process: the C path (`_cfast.TcpAnswerer`, one call per
read) against the message-at-a-time loop (`Responder.handle` per message, which asks the same C table).

Run on demand, not by the test suite:

    PYTHONPATH=src python bench/tcp_bench.py --queries 200000

The TCP protocol of server/tcp.py is fed reads of `--batch` framed round_robin queries (and NXDOMAIN
ones) over a socket pair, as the event loop would after a client pipelined them; the figure is the time
spent in `data_received` (parsing, answering, counting, `transport.write`) per query, the median of
`--rounds`. The other end of the pair is drained outside the timed part. No network, no wake-ups: this is
the per-query cost the C path removes; dns_bench.py's `tcp` scenario measures it end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import statistics
import struct
import time

import dns.message

from gslbd.answer import build_view
from gslbd.limits import ConnectionBudget
from gslbd.model.config import Config, ListenAddress
from gslbd.model.service import Endpoint, Service
from gslbd.model.zone import Nameserver, Soa, Zone
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.server.sockets import bind_tcp
from gslbd.server.stats import ServerStats
from gslbd.server.tcp import TcpListener, _DnsStream
from gslbd.state.snapshot import Snapshot
from gslbd.types import EndpointKind, PolicyName
from gslbd.wire import Responder, compile_table

ORIGIN = "bench.example."


def responder() -> Responder:
    name = f"rr.{ORIGIN}"
    endpoints = tuple(Endpoint(name, f"192.0.2.{i}", EndpointKind.IPV4, "eu") for i in (1, 2, 3))
    service = Service(name, ORIGIN, "rr", policy=PolicyName.ROUND_ROBIN, endpoints=endpoints)
    zone = Zone(
        ORIGIN, 30, 30, Soa(f"ns1.{ORIGIN}", "hostmaster.example.", 1), (Nameserver(f"ns1.{ORIGIN}"),)
    )
    view = build_view(
        Config(zones=(zone,), services=(service,)), Snapshot(), PolicyEnv(NoLocator(), {}, random.Random(1))
    )
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    return Responder(table, view, random.Random(1), native=True)


def batch(size: int, nx: bool) -> bytes:
    out = bytearray()
    for i in range(size):
        name = f"nope{i}.{ORIGIN}" if nx else f"rr.{ORIGIN}"
        wire = dns.message.make_query(name, "A", id=i).to_wire()
        out += struct.pack("!H", len(wire)) + wire
    return bytes(out)


async def measure(native: bool, size: int, queries: int, nx: bool) -> float:
    """µs in data_received per query."""
    loop = asyncio.get_running_loop()
    listener = TcpListener(
        bind_tcp(ListenAddress("127.0.0.1", 0)),
        responder(),
        ServerStats(),
        budget=ConnectionBudget(8),
        native=native,
    )
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    _, proto = await loop.connect_accepted_socket(lambda: _DnsStream(listener, loop), ours)
    assert isinstance(proto, _DnsStream)
    data = batch(size, nx)
    spent = 0
    for _ in range(max(1, queries // size)):
        started = time.perf_counter_ns()
        proto.data_received(data)
        spent += time.perf_counter_ns() - started
        try:
            while theirs.recv(1 << 20):
                pass
        except BlockingIOError:
            pass
    theirs.close()
    await listener.close()
    assert listener.stats.tcp_native_answers == (listener.stats.tcp_queries if native else 0)
    return spent / 1000 / (max(1, queries // size) * size)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queries", type=int, default=200_000, help="queries per measurement")
    p.add_argument("--batches", default="1,10,100", help="queries per read")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    head = ("queries per read", "answer", "handle per message", "C (TcpAnswerer)", "ratio")
    print(f"{head[0]:>16} {head[1]:>9} {head[2]:>19} {head[3]:>16} {head[4]:>6}")
    for size in (int(s) for s in args.batches.split(",")):
        for nx in (False, True):
            figures = {}
            for native in (False, True):
                runs = [asyncio.run(measure(native, size, args.queries, nx)) for _ in range(args.rounds)]
                figures[native] = statistics.median(runs)
            kind = "NXDOMAIN" if nx else "rr"
            print(
                f"{size:>16} {kind:>9} {figures[False]:>16.2f} µs {figures[True]:>13.2f} µs"
                f" {figures[True] / figures[False]:>6.2f}"
            )


if __name__ == "__main__":
    main()
