"""`dns.threads`: N C UDP loops, each on its own socket of one SO_REUSEPORT group, answering from one slot
(table), one guard and one signer. On real loopback sockets, from many client source ports (the kernel
spreads the datagrams over the group's sockets by the client's address and port): every query of a burst
is answered and every loop gets a share, the counters sum exactly, RRL limits one client exactly as one
loop does, a server cookie made by one loop is valid in every other, and swapping the table under load
never serves from a freed one (scripts/fuzz-c runs this file under ASan/UBSan)."""

from __future__ import annotations

import asyncio
import random
import selectors
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import dns.edns
import dns.message
import dns.rcode
import pytest
from gslbd_harness import free_port, running_gslbd
from test_guard_native import events
from test_native_udp import APP, ORIGIN, a_query, exchange, responder

from gslbd.answer import build_view
from gslbd.model.config import CookieConfig, DnsConfig, ListenAddress, RrlConfig
from gslbd.model.service import Endpoint
from gslbd.policy.base import NoLocator, PolicyEnv
from gslbd.server.sockets import bind_udp_group
from gslbd.server.stats import ServerStats
from gslbd.server.udp import UdpListener
from gslbd.state.snapshot import Snapshot
from gslbd.types import EndpointKind
from gslbd.wire import Responder, compile_table
from gslbd.wire import ctable as ct

pytestmark = pytest.mark.skipif(not ct.AVAILABLE, reason="gslbd.wire._cfast is not compiled here")

CLIENT_PORTS = 64  # client sockets per burst: with 4 loops, P(a loop gets none) = 4 * (3/4)**64 < 1e-7
CLIENT_COOKIE = bytes.fromhex("2464c4abcf10c957")


@contextmanager
def threaded(handler: Responder, stats: ServerStats, threads: int) -> Iterator[UdpListener]:
    """One UDP listener with `threads` C loops on one loopback address (any port)."""
    loop = asyncio.new_event_loop()
    first, *siblings = bind_udp_group(ListenAddress("127.0.0.1", 0), threads)
    listener = UdpListener(first, handler, stats, siblings=siblings)
    try:
        listener.start(loop)
        yield listener
    finally:
        listener.close()
        loop.close()


def burst(port: int, make: Callable[[int], bytes], per_port: int) -> list[list[bytes]]:
    """`per_port` queries (make(id)) from each of CLIENT_PORTS client sockets; the replies of each."""
    batches = [[make(c * per_port + i) for i in range(per_port)] for c in range(CLIENT_PORTS)]
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda batch: exchange(port, batch), batches))


def flood(port: int, make: Callable[[int], bytes], per_port: int) -> list[bytes]:
    """Send `per_port` queries from each of CLIENT_PORTS sockets without waiting, then read the replies
    until none comes for 0.5 s (a limiter drops some: the count is not known in advance)."""
    clients = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(CLIENT_PORTS)]
    try:
        with selectors.DefaultSelector() as selector:
            for c, client in enumerate(clients):
                client.setblocking(False)
                selector.register(client, selectors.EVENT_READ)
                for i in range(per_port):
                    client.sendto(make(c * per_port + i), ("127.0.0.1", port))
            replies = []
            while ready := selector.select(timeout=0.5):
                replies += [key.fileobj.recv(65535) for key, _ in ready]  # type: ignore[union-attr]
            return replies
    finally:
        for client in clients:
            client.close()


def queries_by_loop(listener: UdpListener) -> list[int]:
    return [reading[0]["udp_queries"] for reading in listener.loop_counters()]


@pytest.mark.parametrize("threads", [2, 4])
def test_every_loop_answers_a_share_of_a_burst_and_the_counters_sum_exactly(threads: int) -> None:
    handler = responder(native=True)
    stats = ServerStats()
    with threaded(handler, stats, threads) as listener:
        replies = burst(listener.sockname[1], a_query, 40)
        by_loop = queries_by_loop(listener)
    total = CLIENT_PORTS * 40
    answers = [dns.message.from_wire(r) for batch in replies for r in batch]
    assert sorted(a.id for a in answers) == list(range(total))
    assert all(a.rcode() == dns.rcode.NOERROR and len(a.answer[0]) == 3 for a in answers)
    assert len(by_loop) == threads and all(n > 0 for n in by_loop), by_loop
    assert sum(by_loop) == total
    assert (
        stats.udp_queries == stats.udp_responses == stats.udp_native_answers == stats.udp_rcodes[0] == total
    )
    assert handler.policy_answers()["round_robin"] == total


def limited_run(threads: int) -> tuple[dict[str, int], int, int, list[int]]:
    """One client address flooding from many ports under RRL, the guard's clock standing still: (the
    guard's counts, full answers received, truncated ones received, queries per loop)."""
    rrl = RrlConfig(responses_per_second=5, window=1.0, slip=2)
    handler = responder(native=True, dns=DnsConfig(rrl=rrl))
    handler.guard.pin(1000.0, 1_700_000_000.0)  # type: ignore[union-attr]
    stats = ServerStats()
    with threaded(handler, stats, threads) as listener:
        replies = flood(listener.sockname[1], a_query, 20)
        by_loop = queries_by_loop(listener)
    truncated = sum(1 for r in replies if r[2] & 0x02)
    assert stats.udp_native_answers == CLIENT_PORTS * 20  # the C guard: C answers them all
    return handler.guard_counts(), len(replies) - truncated, truncated, by_loop


def test_rrl_limits_one_client_across_loops_exactly_as_with_one_loop() -> None:
    one = limited_run(1)
    four = limited_run(4)
    counts, full, truncated, by_loop = four
    assert all(n > 0 for n in by_loop), by_loop
    assert (counts, full, truncated) == one[:3]
    assert counts["rrl_limited"] == CLIENT_PORTS * 20 - full
    assert truncated == counts["rrl_slipped"] == counts["rrl_limited"] // 2


def with_cookie(cookie: bytes) -> Callable[[int], bytes]:
    def make(qid: int) -> bytes:
        query = dns.message.make_query(APP, "A", id=qid, use_edns=0)
        query.use_edns(0, options=[dns.edns.GenericOption(dns.edns.COOKIE, cookie)])
        return query.to_wire()

    return make


def cookie_of(reply: dns.message.Message) -> bytes:
    return next(o for o in reply.options if o.otype == dns.edns.COOKIE).to_wire()


def test_a_server_cookie_made_by_one_loop_is_valid_in_every_other() -> None:
    handler = responder(native=True, dns=DnsConfig(cookies=CookieConfig()))
    stats = ServerStats()
    with threaded(handler, stats, 4) as listener:
        port = listener.sockname[1]
        first = dns.message.from_wire(exchange(port, [with_cookie(CLIENT_COOKIE)(0)])[0])
        cookie = cookie_of(first)
        assert len(cookie) == 24 and cookie[:8] == CLIENT_COOKIE
        replies = [dns.message.from_wire(r) for b in burst(port, with_cookie(cookie), 5) for r in b]
        by_loop = queries_by_loop(listener)
    assert all(n > 0 for n in by_loop), by_loop
    assert len(replies) == CLIENT_PORTS * 5 and all(r.rcode() == dns.rcode.NOERROR for r in replies)
    assert all(cookie_of(r)[:8] == CLIENT_COOKIE and len(cookie_of(r)) == 24 for r in replies)
    counts = handler.guard_counts()
    assert (counts["cookies_new"], counts["cookies_valid"], counts["cookies_invalid"]) == (1, len(replies), 0)


def test_swapping_the_table_under_load_across_loops_serves_only_whole_tables() -> None:
    """A thread swaps between two tables with different addresses for APP (each swap frees the node the
    loops stop reading) while four loops answer bursts: every reply is one table's answer, whole."""
    handler = responder(native=True)
    view = handler.view
    other = replace(
        view.config,
        services=tuple(
            replace(s, endpoints=(Endpoint(APP, "198.51.100.7", EndpointKind.IPV4, "eu"),))
            for s in view.config.services
        ),
    )
    views = [view, build_view(other, Snapshot(), PolicyEnv(NoLocator(), {}, random.Random(2)))]
    stop = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        while not stop.is_set():
            chosen = views[swaps % 2]
            handler.swap(compile_table(chosen, max_udp_payload=1232, use_client_subnet=True), chosen)
            swaps += 1

    stats = ServerStats()
    with threaded(handler, stats, 4) as listener:
        worker = threading.Thread(target=swapper)
        worker.start()
        try:
            replies = [r for b in burst(listener.sockname[1], a_query, 40) for r in b]
        finally:
            stop.set()
            worker.join()
    expected = ({"192.0.2.1", "192.0.2.2", "192.0.2.3"}, {"198.51.100.7"})
    answers = [dns.message.from_wire(r) for r in replies]
    assert len(answers) == CLIENT_PORTS * 40 and swaps > 10
    assert all({rd.address for rd in a.answer[0]} in expected for a in answers)
    assert stats.udp_native_answers == len(answers)


CONFIG = f"""
version: 1
dns:
  listen: @LISTEN@
  threads: 2
api: {{listen: "127.0.0.1:@API@"}}
zones:
  - origin: {ORIGIN}
    nameservers: [{{name: ns1.{ORIGIN}, address: 192.0.2.53}}]
services:
  - {{name: {APP}, check: none, endpoints: [{{address: 192.0.2.1}}, {{address: 192.0.2.2}}]}}
"""


def test_a_server_with_two_threads_answers_every_query_and_metrics_count_them_once(tmp_path: Path) -> None:
    api = free_port()
    with running_gslbd(tmp_path, CONFIG.replace("@API@", str(api)), zone=ORIGIN) as server:
        before = events(api)
        replies = [r for b in burst(server.port, a_query, 10) for r in b]
        after = events(api)
    assert len(replies) == CLIENT_PORTS * 10
    for event in ("udp_queries", "udp_responses", "udp_native_answers"):
        assert after[event] - before.get(event, 0) == CLIENT_PORTS * 10, event
